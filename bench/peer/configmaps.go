package main

// The "configmaps" operator of bench/configmaps.lua: a controller on every
// ConfigMap whose reconcile does nothing, for what caching N objects costs
// (bench/compare.sh). Not one of the four; run it with --operators configmaps,
// or --operators configmaps-meta for the same on a metadata-only cache.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

type ConfigMapReconciler struct{}

func (r *ConfigMapReconciler) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

func (r *ConfigMapReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).Named("configmaps").For(&corev1.ConfigMap{}).
		WithOptions(opts).Complete(r)
}

// configMapMetadata is what a metadata-only ConfigMap cache holds.
func configMapMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}

// SetupMetadataWithManager is "configmaps-meta": the same controller on a
// metadata-only cache (builder.OnlyMetadata), as a careful user watches a
// large kind whose contents the reconcile never reads.
func (r *ConfigMapReconciler) SetupMetadataWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).Named("configmaps-meta").For(&corev1.ConfigMap{}, builder.OnlyMetadata).
		WithOptions(opts).Complete(r)
}
