// Command kubectl-credwatch is a kubectl plugin, in the spirit of cmctl: `kubectl credwatch status`
// tables every watch and credential with the days it has left, `rotate` asks a watch to rotate
// now, and `check` asks it to check its target now. Install it by putting it on the PATH.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

const usage = `Usage:
  kubectl credwatch status [-n NAMESPACE]          every watch and credential, with days left (all namespaces unless -n)
  kubectl credwatch rotate [-n NAMESPACE] WATCH    rotate the watch's secret now (rotation must be enabled)
  kubectl credwatch rotate --abort [-n NAMESPACE] WATCH
                                                   withdraw the rotation in progress, if no AKS reset began
  kubectl credwatch check  [-n NAMESPACE] WATCH    check the watch's target now (Microsoft Graph, or the API servers)

Flags:
  --kubeconfig FILE   the kubeconfig to use (default: $KUBECONFIG, ~/.kube/config)
`

func main() {
	if err := run(os.Args[1:], os.Stdout, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl credwatch:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer, now time.Time) error {
	fs := flag.NewFlagSet("kubectl credwatch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kubeconfig := fs.String("kubeconfig", "", "")
	namespace := fs.String("n", "", "")
	fs.StringVar(namespace, "namespace", "", "")
	abort := fs.Bool("abort", false, "")
	all := fs.Bool("A", false, "")
	fs.BoolVar(all, "all-namespaces", false, "")
	// Flags may come anywhere, before the command or after the watch's name, as kubectl users
	// write them.
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return fmt.Errorf("%w\n%s", err, usage)
		}
		if fs.NArg() == 0 {
			break
		}
		positional, rest = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
	if len(positional) == 0 {
		return errors.Join(errors.New("name a command: status, rotate or check"), writeOut(out, usage))
	}
	cmd, positional := positional[0], positional[1:]
	c, defaultNS, err := connect(*kubeconfig)
	if err != nil {
		return err
	}
	if *namespace == "" {
		*namespace = defaultNS
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch cmd {
	case "status":
		// Across namespaces unless one is named: the point is to see everything that expires.
		ns := ""
		if namespaceGiven(args) && !*all {
			ns = *namespace
		}
		return status(ctx, c, ns, out, now)
	case "rotate", "check":
		if len(positional) != 1 {
			return fmt.Errorf("%s takes one watch name\n%s", cmd, usage)
		}
		return ask(ctx, c, types.NamespacedName{Namespace: *namespace, Name: positional[0]}, cmd, *abort, out, now)
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

// ask annotates the watch key as cmd (rotate or check, or rotate with abort) asks, and says so.
func ask(ctx context.Context, c client.Client, key types.NamespacedName, cmd string, abort bool, out io.Writer, now time.Time) error {
	annotation, what, check := v1alpha1.CheckAnnotation, "check now", func(*v1alpha1.CredentialWatch) error { return nil }
	switch {
	case cmd == "rotate" && abort:
		annotation, what, check = v1alpha1.AbortRotationAnnotation, "abort its rotation (refused once an AKS reset began; see its events)", rotating
	case cmd == "rotate":
		annotation, what, check = v1alpha1.RotateAnnotation, "rotate now", rotationEnabled
	}
	if err := request(ctx, c, key, annotation, now, check); err != nil {
		return err
	}
	return writeOut(out, fmt.Sprintf("Asked %s to %s.\n", key, what))
}

func namespaceGiven(args []string) bool {
	for _, a := range args {
		if a == "-n" || a == "--namespace" || a == "-namespace" || strings.HasPrefix(a, "-n=") || strings.HasPrefix(a, "--namespace=") {
			return true
		}
	}
	return false
}

func connect(kubeconfig string) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	return c, ns, err
}

// status prints one row per credential, soonest expiry first, one per service-account issuer
// (first when its API servers drift, as they break tokens now), and one for each other watch.
func status(ctx context.Context, c client.Client, namespace string, out io.Writer, now time.Time) error {
	var list v1alpha1.CredentialWatchList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return err
	}
	type row struct {
		end   time.Time
		cells []any
	}
	var rows []row
	for _, w := range list.Items {
		ready := "Unknown"
		if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			ready = string(c.Status) + " (" + c.Reason + ")"
		}
		never := now.Add(100 * 365 * 24 * time.Hour)
		if st := w.Status.ServiceAccountIssuer; st != nil {
			r := row{end: never, cells: []any{w.Namespace, w.Name, ready, "-", "-", "SigningKeys", fmt.Sprintf("%d API servers", len(st.Endpoints)), "-", "-"}}
			var kids []string
			for _, k := range st.Keys {
				kids = append(kids, k.KeyID)
			}
			if len(kids) > 0 {
				r.cells[4] = strings.Join(kids, ",")
			}
			if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionSigningKeyDrift); c != nil {
				r.cells[8] = c.Reason
				if c.Status == metav1.ConditionTrue {
					r.end = now
				}
			}
			rows = append(rows, r)
			continue
		}
		if len(w.Status.Credentials) == 0 {
			rows = append(rows, row{end: never, cells: []any{w.Namespace, w.Name, ready, w.AppID(), "-", "-", "-", "-", "-"}})
		}
		for _, cr := range w.Status.Credentials {
			appID := w.AppID()
			if cr.AppID != "" { // a tenant scan's
				appID = cr.AppID
			}
			rows = append(rows, row{end: cr.EndTime.Time, cells: []any{w.Namespace, w.Name, ready, appID, cr.KeyID, string(cr.Type), string(cr.Source),
				policy.HumanDuration(cr.EndTime.Sub(now)), string(cr.State)}})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].end.Before(rows[j].end) })
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, err := fmt.Fprintln(tw, "NAMESPACE\tWATCH\tREADY\tAPP ID\tKEY ID\tTYPE\tON\tLEFT\tSTATE")
	for _, r := range rows {
		if err == nil {
			_, err = fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%v\t%v\t%v\n", r.cells...)
		}
	}
	return errors.Join(err, tw.Flush())
}

// writeOut writes s to out: a closed pipe is an error to report, as kubectl does.
func writeOut(out io.Writer, s string) error {
	_, err := io.WriteString(out, s)
	return err
}

func rotationEnabled(w *v1alpha1.CredentialWatch) error {
	if w.Spec.Rotation == nil || !w.Spec.Rotation.Enabled {
		return fmt.Errorf("%s/%s does not have rotation enabled: set spec.rotation.enabled first", w.Namespace, w.Name)
	}
	return nil
}

func rotating(w *v1alpha1.CredentialWatch) error {
	if w.Status.Rotation == nil {
		return fmt.Errorf("%s/%s has no rotation in progress", w.Namespace, w.Name)
	}
	return nil
}

// request sets annotation to the current time on the watch, which asks the operator to act once,
// if check allows.
func request(ctx context.Context, c client.Client, key types.NamespacedName, annotation string, now time.Time, check func(*v1alpha1.CredentialWatch) error) error {
	var w v1alpha1.CredentialWatch
	if err := c.Get(ctx, key, &w); err != nil {
		return err
	}
	if err := check(&w); err != nil {
		return err
	}
	patch := client.MergeFrom(w.DeepCopy())
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[annotation] = now.UTC().Format(time.RFC3339Nano)
	return c.Patch(ctx, &w, patch)
}
