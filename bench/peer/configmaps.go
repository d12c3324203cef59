package main

// The "configmaps" operator of bench/configmaps.lua: a controller on every
// ConfigMap whose reconcile does nothing, for what caching N objects costs
// (bench/compare.sh). Not one of the four; run it with --operators configmaps.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
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
