package main

// The "pods" operator of bench/pods.lua: a controller on every Pod whose
// reconcile does nothing, for how cost grows with the Pods cached
// (bench/scale.sh). Not one of the four; run it with --operators pods.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

type PodReconciler struct{}

func (r *PodReconciler) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

func (r *PodReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).Named("pods").For(&corev1.Pod{}).WithOptions(opts).Complete(r)
}
