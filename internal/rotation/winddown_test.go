package rotation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
)

func TestUnitWindDown(t *testing.T) {
	resetting := func(w *world) *v1alpha1.RotationStatus {
		st := w.verified()
		st.Step, st.Resets, st.ResumeToken = v1alpha1.StepClusterUpdating, 1, "op-1"
		return st
	}
	for _, tc := range []struct {
		name        string
		st          func(w *world) *v1alpha1.RotationStatus
		edit        func(w *world, m *Machine)
		late        bool
		wantDone    bool
		wantRelease string
		wantStep    v1alpha1.RotationStep
	}{
		{name: "before any reset it is aborted", st: func(w *world) *v1alpha1.RotationStatus { return w.verified() }, wantDone: true},
		{name: "in use, nothing is in flight", st: func(w *world) *v1alpha1.RotationStatus {
			st := w.verified()
			st.Step, st.Resets = v1alpha1.StepRetiring, 1
			return st
		}, wantRelease: "no reset is in flight"},
		{name: "a reset in flight is followed", st: resetting, edit: func(w *world, _ *Machine) {
			w.pollReset = func(string) (bool, error) { return false, nil }
		}, wantStep: v1alpha1.StepClusterUpdating},
		{name: "a reset in flight, past the deadline", st: resetting, late: true, wantRelease: "its reset's outcome was not known after 1h0m0s"},
		{name: "a reset whose cluster is gone", st: resetting, edit: func(_ *world, m *Machine) {
			m.Cluster = fakeCluster{ReadFunc: func(context.Context) (ClusterState, error) {
				return ClusterState{}, &azerr.Error{Kind: azerr.KindNotFound, Err: errors.New("gone")}
			}}
		}, wantRelease: "its AKS cluster no longer exists"},
		{name: "a reset that ended", st: resetting, wantRelease: "its reset ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			st := tc.st(w)
			m := w.machine(true)
			if tc.edit != nil {
				tc.edit(w, m)
			}
			deadline := w.now.Add(time.Second)
			if tc.late {
				deadline = w.now.Add(-time.Minute)
			}
			e, err := m.WindDown(t.Context(), *st, deadline)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case e.Done != tc.wantDone || e.Release != tc.wantRelease:
				t.Errorf("ending %+v, want done %v, released %q", e, tc.wantDone, tc.wantRelease)
			case tc.wantStep != "" && (e.Result.Status == nil || e.Result.Status.Step != tc.wantStep || e.Result.Next.After(deadline)):
				t.Errorf("result %+v, want the rotation at %s, back by the deadline %v", e.Result, tc.wantStep, deadline)
			}
		})
	}
}

func TestUnitReleaseHandsOnWhatTheClusterMayUse(t *testing.T) {
	w := newWorld(t)
	st := w.verified()
	st.Step, st.Resets = v1alpha1.StepClusterUpdating, 1
	m := w.machine(true)
	msg := Release(t.Context(), Let{Store: m.Store, Secret: "team-a/payments-sp", RemoveOld: v1alpha1.RemoveOldNever}, *st, "its reset ended")
	if w.published.KeyID != "k-1" || !strings.Contains(msg, "the new secret k-1, which the cluster may use, is in Secret team-a/payments-sp") ||
		!strings.Contains(msg, "az ad app credential delete --id "+testApp) {
		t.Errorf("published %+v, note %q: want k-1 in the target Secret, and said", w.published, msg)
	}

	w = newWorld(t)
	st = w.verified()
	m = w.machine(true)
	msg = Release(t.Context(), Let{Store: m.Store, Secret: "team-a/payments-sp", RemoveOld: v1alpha1.RemoveOldNever}, *st, "x")
	if w.discards != 1 || w.published.KeyID != "" || !strings.Contains(msg, "the new secret k-1, never used, is still in Graph") {
		t.Errorf("%d discards, published %+v, note %q: want the staged copy discarded, nothing published", w.discards, w.published, msg)
	}
}
