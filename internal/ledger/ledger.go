// Package ledger keeps a watch's record of what it told whom when that outgrows the watch's
// status: in ConfigMaps of the watch's namespace, controlled by the watch (so they go with it),
// each holding the entries whose keys hash to it. Entries are written before the message they
// record goes out, with an optimistic lock on each shard: a reconcile working from a stale read,
// or a deposed leader, fails its write and must send nothing.
package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Shards is how many ConfigMaps a ledger spreads over, each created once an entry falls in it.
// A ConfigMap holds at most 1 MiB: sixteen hold some 200,000 entries of 60 bytes.
const Shards = 16

// maxShardBytes is what a shard may hold, under the API server's 1 MiB with room for metadata.
const maxShardBytes = 900 << 10

// labelOf marks a ledger's ConfigMaps with the UID of the watch they belong to, for people.
const labelOf = "credwatch.dev/ledger-of"

// Owner is the watch a ledger belongs to.
type Owner struct {
	Namespace, Name string
	UID             types.UID
	// APIVersion and Kind are the owner's, for the owner reference.
	APIVersion, Kind string
}

// Store reads ledgers through Reader, which should not be a cache (a cache of ConfigMaps would
// hold every one in the cluster), and writes them through Writer.
type Store struct {
	Reader client.Reader
	Writer client.Writer
}

// Book is a ledger as loaded: its entries, and each shard's version for the next write.
type Book struct {
	owner  Owner
	shards [Shards]*corev1.ConfigMap
}

// ForeignError is a ConfigMap of a ledger's name that its watch does not control: someone
// created it, perhaps to silence the watch's messages, and it is neither read nor written.
type ForeignError struct{ Name string }

func (e *ForeignError) Error() string {
	return fmt.Sprintf("ConfigMap %s has the name of this watch's ledger but the watch does not control it, so credwatch neither reads nor writes it: delete it", e.Name)
}

// ForbiddenError is the API server refusing the operator ConfigMap writes in the ledger's
// namespace: the chart grants them only in the namespaces an admin listed.
type ForbiddenError struct{ Namespace string }

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("the operator may not write ConfigMaps in namespace %s, where this watch keeps what it sent to whom, so it sends nothing: "+
		"a cluster admin lists the namespace in the chart's ledgerNamespaces", e.Namespace)
}

// rbacDenied tells the authorizer's refusal ("… cannot create resource …") from the other 403s
// of a write, a quota exceeded or an admission webhook's denial, which a chart value would not
// fix and which are retried.
func rbacDenied(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "cannot create resource") || strings.Contains(msg, "cannot update resource")
}

// ShardName is the name of shard i of owner's ledger. The UID, hashed, keeps it short whatever
// the watch's name, and differs for a watch deleted and created again.
func ShardName(owner Owner, i int) string {
	sum := sha256.Sum256([]byte(owner.UID))
	return fmt.Sprintf("credwatch-ledger-%s-%02d", hex.EncodeToString(sum[:])[:12], i)
}

func shardOf(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % Shards)
}

// Load reads owner's ledger, empty when it has none yet. Its shards are read by name, one at a
// time: a list by label would also read whatever else anyone labelled so.
func (s *Store) Load(ctx context.Context, owner Owner) (*Book, error) {
	b := &Book{owner: owner}
	for i := range Shards {
		cm := &corev1.ConfigMap{}
		err := s.Reader.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: ShardName(owner, i)}, cm)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the ledger: %w", err)
		}
		if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != owner.UID || cm.Labels[labelOf] != string(owner.UID) {
			return nil, &ForeignError{Name: cm.Name}
		}
		b.shards[i] = cm
	}
	return b, nil
}

// Get is the entry of key, and whether there is one.
func (b *Book) Get(key string) (string, bool) {
	cm := b.shards[shardOf(key)]
	if cm == nil {
		return "", false
	}
	v, ok := cm.Data[key]
	return v, ok
}

// Entries calls f with every entry.
func (b *Book) Entries(f func(key, value string)) {
	for _, cm := range b.shards {
		if cm == nil {
			continue
		}
		for k, v := range cm.Data {
			f(k, v)
		}
	}
}

// Len is the number of entries.
func (b *Book) Len() int {
	n := 0
	for _, cm := range b.shards {
		if cm != nil {
			n += len(cm.Data)
		}
	}
	return n
}

// Write sets each key of changes to its value, or removes it where the value is nil, one write
// per shard touched, each on the version loaded. It returns the keys written: those of a shard
// whose write failed are not, and the error says why (a conflict: the ledger changed since it
// was loaded). The book follows what was written.
func (s *Store) Write(ctx context.Context, b *Book, changes map[string]*string) ([]string, error) {
	byShard := map[int]map[string]*string{}
	for k, v := range changes {
		i := shardOf(k)
		if byShard[i] == nil {
			byShard[i] = map[string]*string{}
		}
		byShard[i][k] = v
	}
	var written []string
	var errs []error
	for i, ch := range byShard {
		if err := s.writeShard(ctx, b, i, ch); err != nil {
			errs = append(errs, err)
			continue
		}
		for k := range ch {
			written = append(written, k)
		}
	}
	return written, errors.Join(errs...)
}

func (s *Store) writeShard(ctx context.Context, b *Book, i int, changes map[string]*string) error {
	cm := b.shards[i]
	create := cm == nil
	if create {
		o := b.owner
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: ShardName(o, i), Namespace: o.Namespace, Labels: map[string]string{labelOf: string(o.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, Controller: ptr.To(true)}},
		}}
	} else {
		cm = cm.DeepCopy()
	}
	data := maps.Clone(cm.Data)
	if data == nil {
		data = map[string]string{}
	}
	size := 0
	for k, v := range changes {
		if v == nil {
			delete(data, k)
		} else {
			data[k] = *v
		}
	}
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > maxShardBytes {
		return fmt.Errorf("ledger shard %s would hold %d bytes, more than a ConfigMap can", cm.Name, size)
	}
	cm.Data = data
	var err error
	if create {
		err = s.Writer.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			// Not listed by its label: created by someone else, or by another writer meanwhile.
			return &ForeignError{Name: cm.Name}
		}
	} else {
		// Update carries the resourceVersion loaded: the API server refuses it if the shard changed.
		err = s.Writer.Update(ctx, cm)
	}
	if apierrors.IsForbidden(err) && rbacDenied(err) {
		return &ForbiddenError{Namespace: cm.Namespace}
	}
	if err != nil {
		return fmt.Errorf("writing ledger shard %s: %w", cm.Name, err)
	}
	b.shards[i] = cm
	return nil
}
