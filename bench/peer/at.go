package main

// The cnat "At" operator (operators/at.lua): run a command in a Pod at a
// given time. status.phase goes PENDING -> RUNNING -> DONE; an At whose
// schedule is no real time is FAILED, once.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

type AtReconciler struct {
	client.Client
	Recorder record.EventRecorder
}

func (r *AtReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("at").
		For(&At{}).
		Owns(&corev1.Pod{}).
		WithOptions(opts).
		Complete(r)
}

// setPhase writes the new phase through /status; a stale copy fails with
// Conflict and the reconcile runs again from fresh state.
func (r *AtReconciler) setPhase(ctx context.Context, at *At, phase, message string) error {
	log.FromContext(ctx).Info("phase", "from", at.Status.Phase, "to", phase)
	at.Status = AtStatus{Phase: phase, Message: message}
	return r.Status().Update(ctx, at)
}

func (r *AtReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var at At
	if err := r.Get(ctx, req.NamespacedName, &at); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // deleted; its Pod goes with it
	}

	switch at.Status.Phase {
	case "":
		if err := r.setPhase(ctx, &at, PhasePending, ""); err != nil {
			return ctrl.Result{}, err
		}
		r.Recorder.Eventf(&at, corev1.EventTypeNormal, "Scheduled", "runs %s at %s", at.Spec.Command, at.Spec.Schedule)

	case PhasePending:
		when, err := time.Parse(time.RFC3339, at.Spec.Schedule)
		if err != nil { // retrying cannot fix it: say so once, and stop
			msg := "spec.schedule: " + err.Error()
			r.Recorder.Event(&at, corev1.EventTypeWarning, "InvalidSchedule", msg)
			return ctrl.Result{}, r.setPhase(ctx, &at, PhaseFailed, msg)
		}
		if d := time.Until(when); d > 0 { // not yet: come back then
			return ctrl.Result{RequeueAfter: d}, nil
		}
		return ctrl.Result{}, r.setPhase(ctx, &at, PhaseRunning, "")

	case PhaseRunning:
		var pod corev1.Pod
		err := r.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name + "-pod"}, &pod)
		if apierrors.IsNotFound(err) {
			pod := podFor(&at)
			if err := controllerutil.SetControllerReference(&at, pod, r.Scheme()); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.Create(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(&at, corev1.EventTypeNormal, "PodCreated", "created pod %s", pod.Name)
			return ctrl.Result{}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		// not a Pod of an earlier At of the same name, not yet collected (retried)
		if owner := metav1.GetControllerOf(&pod); owner == nil || owner.UID != at.UID {
			return ctrl.Result{}, fmt.Errorf("the pod is another At's")
		}
		if p := pod.Status.Phase; p == corev1.PodSucceeded || p == corev1.PodFailed {
			if err := r.setPhase(ctx, &at, PhaseDone, ""); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(&at, corev1.EventTypeNormal, "Done", "pod %s %s", pod.Name, p)
		}
	}
	return ctrl.Result{}, nil
}

// podFor is the Pod <name>-pod that runs the At's command, split on spaces,
// in a busybox container.
func podFor(at *At) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: at.Name + "-pod", Namespace: at.Namespace},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{{
				Name:    "busybox",
				Image:   "busybox",
				Command: strings.Fields(at.Spec.Command),
			}},
		},
	}
}
