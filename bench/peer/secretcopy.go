package main

// The secret copier (operators/secret-copy.lua): Secrets of type
// k8s.ziwon.dev/secretsync in namespace secretsync are copied into every
// other namespace, and kept so. Copies carry a label naming their source;
// a finalizer on the source lets the copies be removed before it goes.

import (
	"bytes"
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const (
	sourceNamespace = "secretsync"
	syncType        = corev1.SecretType("k8s.ziwon.dev/secretsync")
	sourceLabel     = "secretsync.k8s.ziwon.dev/source" // on copies: the source's name
	copiesFinalizer = "secretsync.k8s.ziwon.dev/copies"
)

var excludedNamespaces = map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true}

type SecretCopyReconciler struct {
	client.Client
	Recorder record.EventRecorder
}

func isSource(obj client.Object) bool {
	s, ok := obj.(*corev1.Secret)
	return ok && s.Namespace == sourceNamespace && s.Type == syncType
}

func isCopy(obj client.Object) bool {
	_, ok := obj.GetLabels()[sourceLabel]
	return ok
}

func (r *SecretCopyReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("secret-copy").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(isSource))).
		// a new namespace needs every source
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.allSources)).
		// a copy that drifts or goes away brings its source back
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(sourceOfCopy),
			builder.WithPredicates(predicate.NewPredicateFuncs(isCopy))).
		WithOptions(opts).
		Complete(r)
}

func (r *SecretCopyReconciler) allSources(ctx context.Context, _ client.Object) []ctrl.Request {
	var list corev1.SecretList
	if err := r.List(ctx, &list, client.InNamespace(sourceNamespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing the sources")
		return nil
	}
	var reqs []ctrl.Request
	for i := range list.Items {
		if isSource(&list.Items[i]) {
			reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: sourceNamespace, Name: list.Items[i].Name}})
		}
	}
	return reqs
}

func sourceOfCopy(_ context.Context, obj client.Object) []ctrl.Request {
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: sourceNamespace, Name: obj.GetLabels()[sourceLabel]}}}
}

func (r *SecretCopyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var src corev1.Secret
	err := r.Get(ctx, req.NamespacedName, &src)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	gone := err != nil || !isSource(&src)

	var copies corev1.SecretList
	if err := r.List(ctx, &copies, client.MatchingLabels{sourceLabel: req.Name}); err != nil {
		return ctrl.Result{}, err
	}

	if gone || !src.DeletionTimestamp.IsZero() {
		// going: remove the copies, then let the source go
		for i := range copies.Items {
			c := &copies.Items[i]
			logger.Info("deleting copy", "copy", c.Namespace+"/"+c.Name)
			if err := r.Delete(ctx, c); err != nil {
				return ctrl.Result{}, err
			}
			if !gone {
				r.Recorder.Event(&src, corev1.EventTypeNormal, "CopyRemoved", "removed the copy in "+c.Namespace)
			}
		}
		if !gone && controllerutil.RemoveFinalizer(&src, copiesFinalizer) {
			return ctrl.Result{}, r.Update(ctx, &src)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&src, copiesFinalizer) {
		return ctrl.Result{}, r.Update(ctx, &src) // the update brings us back
	}

	existing := map[string]*corev1.Secret{}
	for i := range copies.Items {
		existing[copies.Items[i].Namespace] = &copies.Items[i]
	}
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces); err != nil {
		return ctrl.Result{}, err
	}
	for _, ns := range namespaces.Items {
		name := ns.Name
		if name == sourceNamespace || excludedNamespaces[name] || ns.Status.Phase == corev1.NamespaceTerminating {
			continue
		}
		want := wantedCopy(&src, name)
		switch c := existing[name]; {
		case c == nil:
			logger.Info("creating copy", "copy", name+"/"+req.Name)
			err := r.Create(ctx, want)
			if err == nil {
				r.Recorder.Event(&src, corev1.EventTypeNormal, "CopyCreated", "copied into "+name)
			} else if !apierrors.IsAlreadyExists(err) { // AlreadyExists: its watch event is on its way
				return ctrl.Result{}, err
			}
		case c.Type != want.Type: // the type cannot change: replace it
			if err := r.Delete(ctx, c); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // as luaop.requeue(): rate-limited
		case !maps.EqualFunc(c.Data, want.Data, bytes.Equal):
			logger.Info("updating copy", "copy", name+"/"+req.Name)
			c.Data = want.Data
			if err := r.Update(ctx, c); err != nil { // Conflict: retried from fresh state
				return ctrl.Result{}, err
			}
			r.Recorder.Event(&src, corev1.EventTypeNormal, "CopyUpdated", "updated the copy in "+name)
		}
	}
	return ctrl.Result{}, nil
}

func wantedCopy(src *corev1.Secret, namespace string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      src.Name,
			Namespace: namespace,
			Labels:    map[string]string{sourceLabel: src.Name},
		},
		Type: src.Type,
		Data: src.Data,
	}
}
