package aksfleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/ledger"
)

// A fleet's ledger at its bound, 1,000 clusters on the four kinds of channel, fits its shards
// many times over: 142 KB in sixteen shards, under 10 KB each.
func TestUnitLedgerHoldsAThousandClustersOnFourChannels(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	s := &ledger.Store{Reader: c, Writer: c}
	b, _ := s.Load(ctx, ledger.Owner{Namespace: "team-a", Name: "fleet", UID: "0b6a3d4e-7c1f-4b8e-9a2d-5e6f7a8b9c0d", APIVersion: "credwatch.dev/v1alpha1", Kind: "CredentialWatch"})
	changes := map[string]*string{}
	end := time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, ch := range []string{"slack", "email", "teams", "webhook"} {
		for i := range 1000 {
			id := fmt.Sprintf("/subscriptions/%08d-0000-4000-8000-000000000000/resourceGroups/rg-%d/providers/Microsoft.ContainerService/managedClusters/aks-%d", i%40, i, i)
			changes[LedgerKey(ch, id)] = ptr.To(Note{State: v1alpha1.StateCritical, End: end}.String())
		}
	}
	if written, err := s.Write(ctx, b, changes); err != nil || len(written) != 4000 {
		t.Fatalf("wrote %d of 4000: %v", len(written), err)
	}
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	total, largest := 0, 0
	for _, cm := range list.Items {
		size := 0
		for k, v := range cm.Data {
			size += len(k) + len(v)
		}
		total, largest = total+size, max(largest, size)
	}
	if len(list.Items) > ledger.Shards || largest > 32<<10 || total > 200<<10 {
		t.Errorf("%d shards, the largest %d bytes, %d in all: want at most %d shards of a few KB", len(list.Items), largest, total, ledger.Shards)
	}
	t.Logf("1,000 clusters on 4 channels: %d shards, %d bytes in all, the largest %d", len(list.Items), total, largest)
}
