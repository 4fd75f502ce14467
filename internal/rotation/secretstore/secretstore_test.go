package secretstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/secret"
)

var watch = &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "payments", UID: "uid-1"}}

func newStore(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (*Store, client.Client) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	return &Store{Reader: c, Writer: c, Watch: watch, Target: "sp-credentials", TenantID: "tenant", AppID: "app"}, c
}

func newSecret(text string) rotation.NewSecret {
	return rotation.NewSecret{KeyID: "key-1", Text: secret.New(text), End: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func get(t *testing.T, c client.Client, name string) *corev1.Secret {
	var sec corev1.Secret
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "team", Name: name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return &sec
}

// The secret is staged in a Secret the watch owns, read back, then published to the target,
// which its consumers read only once the secret is in use.
func TestStageThenPublish(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, interceptor.Funcs{})
	if err := s.Write(ctx, "credwatch-x", newSecret("s3cret"), false); err != nil {
		t.Fatal(err)
	}
	staged := get(t, c, rotation.StagingName("payments"))
	if staged == nil || !metav1.IsControlledBy(staged, watch) || string(staged.Data["clientSecret"]) != "s3cret" || get(t, c, "sp-credentials") != nil {
		t.Fatalf("staged %+v; want the secret in a Secret the watch controls, and no target yet", staged)
	}
	if staged.Immutable == nil || !*staged.Immutable {
		t.Error("the staging Secret is not immutable: it could be edited in place")
	}

	if held, err := s.Held(ctx); err != nil || held.KeyID != "key-1" || held.DisplayName != "credwatch-x" || !held.End.Equal(newSecret("").End) {
		t.Fatalf("Held = %+v, %v", held, err)
	}
	if text, err := s.Text(ctx, "key-1"); err != nil || text.Reveal() != "s3cret" {
		t.Fatalf("Text = %v", err)
	}
	if err := s.Publish(ctx, "key-1", secret.New("s3cret").Digest()+"0"); !errors.Is(err, rotation.ErrSecretChanged) || get(t, c, "sp-credentials") != nil {
		t.Fatalf("publishing with another text's digest: %v; want it refused, and nothing published", err)
	}
	if err := s.Publish(ctx, "key-1", secret.New("s3cret").Digest()); err != nil {
		t.Fatal(err)
	}
	published := get(t, c, "sp-credentials")
	if published == nil || string(published.Data["clientSecret"]) != "s3cret" || string(published.Data["tenantID"]) != "tenant" ||
		published.Labels[policy.LabelManagedBy] != policy.ManagedByCredwatch || get(t, c, rotation.StagingName("payments")) != nil {
		t.Fatalf("published %+v; want the secret in the target, marked as credwatch's, and the staging Secret gone", published)
	}
	if err := s.Publish(ctx, "key-1", ""); err != nil {
		t.Fatalf("publishing again, as a reconcile interrupted after publishing would: %v", err)
	}
	if _, err := s.Text(ctx, "key-2"); err == nil || !strings.Contains(err.Error(), "changed by someone else") {
		t.Fatalf("Text of another key = %v; want the secret reported lost", err)
	}
}

// A Secret the watch did not make is neither read as the rotation's nor overwritten; keys the
// rotation does not write stay in a Secret it adopts.
func TestForeignSecrets(t *testing.T) {
	ctx := context.Background()
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "sp-credentials"}, Data: map[string][]byte{"password": []byte("theirs")}}
	s, _ := newStore(t, interceptor.Funcs{}, foreign)
	err := s.Write(ctx, "credwatch-x", newSecret("s3cret"), true)
	if !errors.Is(err, rotation.ErrForeign) || !strings.Contains(err.Error(), "kubectl label secret -n team sp-credentials") {
		t.Fatalf("Write over a foreign Secret = %v; want ErrForeign saying how to hand it over", err)
	}
	adopted := foreign.DeepCopy()
	adopted.ResourceVersion = ""
	adopted.Labels = map[string]string{policy.LabelManagedBy: policy.ManagedByCredwatch}
	adopted.Annotations = map[string]string{policy.AnnotationWatch: "payments"}
	s, c := newStore(t, interceptor.Funcs{}, adopted)
	if err := s.Write(ctx, "credwatch-x", newSecret("s3cret"), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, "key-1", ""); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "sp-credentials"); string(got.Data["password"]) != "theirs" || string(got.Data["clientSecret"]) != "s3cret" {
		t.Fatalf("adopted Secret holds %v; want its own keys kept beside the rotation's", got.Data)
	}

	s.Target = rotation.StagingName("payments")
	if _, err := s.Held(ctx); !errors.Is(err, rotation.ErrForeign) {
		t.Fatalf("a target named as the staging Secret: Held = %v; want it refused", err)
	}
}

// A Secret named as the watch's staging Secret, marked as the watch's but not controlled by it,
// was made by someone who may create Secrets in the namespace: it is not read as the rotation's.
func TestStagingSecretNotControlledByTheWatch(t *testing.T) {
	planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: rotation.StagingName("payments"),
		Labels:      map[string]string{policy.LabelManagedBy: policy.ManagedByCredwatch},
		Annotations: map[string]string{policy.AnnotationWatch: "payments"}},
		Data: map[string][]byte{"clientID": []byte("app"), "clientSecret": []byte("planted"), "keyID": []byte("key-x")}}
	s, _ := newStore(t, interceptor.Funcs{}, planted)
	if _, err := s.Held(context.Background()); !errors.Is(err, rotation.ErrForeign) {
		t.Fatalf("Held = %v; want the planted staging Secret refused", err)
	}
	if _, err := s.Text(context.Background(), "key-x"); !errors.Is(err, rotation.ErrForeign) {
		t.Fatalf("Text = %v; want the planted secret never read as the rotation's", err)
	}
}

// An admission webhook may quote the object it refused: a refused write that carried the secret
// does not repeat the API server's message.
func TestRefusedWriteDoesNotQuoteTheSecret(t *testing.T) {
	refuse := interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("policy refused data clientSecret=s3cret"))
	}}
	s, _ := newStore(t, refuse)
	err := s.Write(context.Background(), "credwatch-x", newSecret("s3cret"), false)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("Write = %v; want the refusal's code without its message", err)
	}
}

func TestStagingNameFitsAnyWatchName(t *testing.T) {
	long := strings.Repeat("w", 253)
	if got := rotation.StagingName(long); len(got) > 253 || got == rotation.StagingName(long[:252]+"x") {
		t.Fatalf("StagingName of a 253-character name = %q (%d); want at most 253 characters, told apart by a hash", got, len(got))
	}
	if got := rotation.StagingName("payments"); got != "credwatch-rotation-payments" {
		t.Fatalf("StagingName = %q", got)
	}
}

// A staging Secret an earlier attempt left is immutable: the next secret replaces it (a dry run
// asks whether it may be deleted), and it is never updated.
func TestAStagingSecretIsReplacedNotUpdated(t *testing.T) {
	ctx := context.Background()
	staging := rotation.StagingName("payments")
	var updates, deletes int
	s, c := newStore(t, interceptor.Funcs{
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if obj.GetName() == staging {
				updates++
			}
			return cl.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes++
			return cl.Delete(ctx, obj, opts...)
		},
	})
	if err := s.Write(ctx, "credwatch-x", newSecret("first"), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "credwatch-y", newSecret("second"), true); err != nil {
		t.Fatalf("the dry run over a staging Secret: %v", err)
	}
	if err := s.Write(ctx, "credwatch-y", newSecret("second"), false); err != nil {
		t.Fatal(err)
	}
	staged := get(t, c, staging)
	if staged == nil || string(staged.Data["clientSecret"]) != "second" || staged.Immutable == nil || !*staged.Immutable || updates != 0 || deletes != 2 {
		t.Fatalf("staged %+v after %d updates and %d deletes (one a dry run); want the second secret, immutable, never updated", staged, updates, deletes)
	}
}
