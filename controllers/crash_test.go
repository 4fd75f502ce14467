package controllers

import (
	"context"
	"errors"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// errDied is what every write answers once the simulated process has died.
var errDied = errors.New("the operator process died here")

// crashingClient stands for an operator that dies at a chosen moment: once dead is set, nothing
// it writes reaches the API server any more, so what is stored is exactly what was written before.
type crashingClient struct {
	client.Client
	dead *atomic.Bool
	// budget, when set, is how many more writes get through before the process dies.
	budget *atomic.Int32
}

// dies reports whether this write finds the process dead, spending the budget.
func (c crashingClient) dies() bool {
	if c.budget != nil && c.budget.Add(-1) < 0 {
		c.dead.Store(true)
	}
	return c.dead.Load()
}

func (c crashingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c crashingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c crashingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c crashingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c crashingClient) Status() client.SubResourceWriter {
	return crashingStatus{c.Client.Status(), c}
}

type crashingStatus struct {
	client.SubResourceWriter
	c crashingClient
}

func (s crashingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.c.dies() {
		return errDied
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s crashingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.c.dies() {
		return errDied
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}
