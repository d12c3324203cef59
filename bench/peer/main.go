// The controller-runtime peer of luaop's four example operators, for the
// benchmarks only (bench/peer.sh builds it): the same groups, kinds, fields
// and behaviour as operators/*.lua, written as a kubebuilder user would,
// with controller-runtime's defaults.
//
//	peer [--kubeconfig FILE] [--workers N] [--operators at,machine,secret-copy,pod-watcher[,configmaps,configmaps-meta,pods,at-webhook]]
//	     [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR] [--namespace NS]
//	     [--webhook-bind-address HOST:PORT] [--webhook-cert-path DIR] [--enable-http2]
//	     [--strip-managed-fields]
//
// --strip-managed-fields is the peer at its best: every cache drops
// managedFields as it stores an object (cache.TransformStripManagedFields()
// as the DefaultTransform), as a careful controller-runtime user sets, and as
// luaop's caches always do. "configmaps-meta" is "configmaps" reading
// metadata only (builder.OnlyMetadata: PartialObjectMetadata from the API
// server), against luaop's metadata-only informer.
//
// "at-webhook" (never run by default) is the validating webhook of
// operators/webhooks/at-webhooks.lua on controller-runtime's webhook server
// (bench/webhook.sh); the webhook flags are luaop's, which are kubebuilder
// v4's scaffold's.
//
// It logs "caches synced" once the caches of every operator it runs have
// synced.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var allOperators = []string{"at", "machine", "secret-copy", "pod-watcher"}

// benchOperators are known to --operators but not run by default.
var benchOperators = []string{"configmaps", "configmaps-meta", "pods", "at-webhook"}

func main() {
	var (
		workers     int
		operators   string
		metricsAddr string
		probeAddr   string
		namespace   string
		webhookAddr string
		certDir     string
		http2       bool
		stripMF     bool
		zapOpts     zap.Options
		setupLog    = ctrl.Log.WithName("setup")
		scheme      = runtime.NewScheme()
		watched     []client.Object // what each operator caches, for "caches synced"
		enabled     = map[string]bool{}
	)
	// --kubeconfig is controller-runtime's own (pkg/client/config), as is KUBECONFIG
	flag.IntVar(&workers, "workers", 1, "MaxConcurrentReconciles of every controller")
	flag.StringVar(&operators, "operators", strings.Join(allOperators, ","), "the operators to run, comma-separated")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "the metrics endpoint's address (0: off)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "0", "the health probes' address (0: off)")
	flag.StringVar(&namespace, "namespace", "", "cache only this namespace (default: all)")
	flag.StringVar(&webhookAddr, "webhook-bind-address", ":9443", "the webhook server's address (with --operators at-webhook)")
	flag.StringVar(&certDir, "webhook-cert-path", "", "the directory of tls.crt and tls.key (default: controller-runtime's CertDir)")
	flag.BoolVar(&http2, "enable-http2", false, "serve webhooks over HTTP/2 too")
	flag.BoolVar(&stripMF, "strip-managed-fields", false, "drop managedFields from every cached object (cache.TransformStripManagedFields)")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	for _, name := range strings.Split(operators, ",") {
		known := false
		for _, o := range append(allOperators, benchOperators...) {
			known = known || o == name
		}
		if !known {
			fmt.Fprintf(os.Stderr, "peer: --operators: unknown operator %q (known: %s)\n", name,
				strings.Join(append(allOperators, benchOperators...), ","))
			os.Exit(2)
		}
		enabled[name] = true
	}

	must := func(err error, what string) {
		if err != nil {
			setupLog.Error(err, what)
			os.Exit(1)
		}
	}
	must(clientgoscheme.AddToScheme(scheme), "adding client-go's types")
	must(cnatBuilder.AddToScheme(scheme), "adding cnat's types")
	must(uselessBuilder.AddToScheme(scheme), "adding useless' types")

	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	}
	if namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	if stripMF {
		opts.Cache.DefaultTransform = cache.TransformStripManagedFields()
	}
	if enabled["at-webhook"] {
		host, p, err := net.SplitHostPort(webhookAddr)
		must(err, "--webhook-bind-address")
		port, err := strconv.Atoi(p)
		must(err, "--webhook-bind-address")
		opts.WebhookServer = webhookServer(host, port, certDir, http2)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts)
	must(err, "creating the manager")

	ctx := ctrl.SetupSignalHandler()
	copts := controller.Options{MaxConcurrentReconciles: workers}
	if enabled["at"] {
		must((&AtReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("at")}).
			SetupWithManager(mgr, copts), "setting up at")
		watched = append(watched, &At{}, &corev1.Pod{})
	}
	if enabled["machine"] {
		must((&MachineReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("machine")}).
			SetupWithManager(mgr, copts), "setting up machine")
		watched = append(watched, &Machine{}, &Switch{})
	}
	if enabled["secret-copy"] {
		must((&SecretCopyReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("secret-copy")}).
			SetupWithManager(mgr, copts), "setting up secret-copy")
		watched = append(watched, &corev1.Secret{}, &corev1.Namespace{})
	}
	if enabled["pod-watcher"] {
		must(setupPodWatcher(ctx, mgr), "setting up pod-watcher")
		watched = append(watched, &corev1.Pod{})
	}

	if enabled["configmaps"] {
		must((&ConfigMapReconciler{}).SetupWithManager(mgr, copts), "setting up configmaps")
		watched = append(watched, &corev1.ConfigMap{})
	}
	if enabled["pods"] {
		must((&PodReconciler{}).SetupWithManager(mgr, copts), "setting up pods")
		watched = append(watched, &corev1.Pod{})
	}
	if enabled["configmaps-meta"] {
		must((&ConfigMapReconciler{}).SetupMetadataWithManager(mgr, copts), "setting up configmaps-meta")
		watched = append(watched, configMapMetadata())
	}

	if enabled["at-webhook"] {
		must((&AtValidator{}).SetupWebhookWithManager(mgr), "setting up at-webhook")
	}

	must(mgr.AddHealthzCheck("healthz", healthz.Ping), "adding the health check")
	must(mgr.AddReadyzCheck("readyz", healthz.Ping), "adding the ready check")

	// One stable line once every informer the operators use has synced (the
	// controllers log "Starting workers" each, after their own).
	must(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for _, obj := range watched {
			if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
				if ctx.Err() != nil {
					return nil // stopped before the caches synced
				}
				return err
			}
		}
		if mgr.GetCache().WaitForCacheSync(ctx) {
			setupLog.Info("caches synced")
		}
		return nil
	})), "adding the sync logger")

	setupLog.Info("starting manager", "operators", operators, "workers", workers)
	must(mgr.Start(ctx), "running the manager")
}
