package main

// The useless machine (operators/useless-machine.lua): a Machine has
// spec.switches Switches; whoever sets a switch up, the operator sets it
// back down 5 s after it saw it, at most one switch per machine every 5 s.

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// flipDelay is how long a switch seen up stays up; also the least time
// between two flips of one machine.
const flipDelay = 5 * time.Second

type MachineReconciler struct {
	client.Client
	Recorder record.EventRecorder

	mu       sync.Mutex
	lastFlip map[types.UID]time.Time // machine -> when this process last flipped one of its switches
}

func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.lastFlip = map[types.UID]time.Time{}
	return ctrl.NewControllerManagedBy(mgr).
		Named("machine").
		For(&Machine{}).
		Owns(&Switch{}).
		// a switch names its machine by label too, so a switch labelled by
		// hand, without an owner reference, counts as well
		Watches(&Switch{}, handler.EnqueueRequestsFromMapFunc(machineOfSwitch)).
		WithOptions(opts).
		Complete(r)
}

func machineOfSwitch(_ context.Context, obj client.Object) []ctrl.Request {
	name, ok := obj.GetLabels()["machine"]
	if !ok {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var machine Machine
	if err := r.Get(ctx, req.NamespacedName, &machine); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // deleted: the garbage collector takes its switches
	}

	// its switches, oldest first (so scaling down removes the newest)
	var list SwitchList
	if err := r.List(ctx, &list, client.InNamespace(req.Namespace), client.MatchingLabels{"machine": req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	switches := list.Items
	sort.Slice(switches, func(i, j int) bool {
		a, b := switches[i], switches[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})

	// scale: create the missing switches, delete the newest extra ones
	for len(switches) < machine.Spec.Switches {
		sw := Switch{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName: "switch-",
				Namespace:    machine.Namespace,
				Labels:       map[string]string{"machine": machine.Name},
			},
			Spec: SwitchSpec{Position: "down"},
		}
		if err := controllerutil.SetControllerReference(&machine, &sw, r.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, &sw); err != nil {
			return ctrl.Result{}, err
		}
		switches = append(switches, sw)
		r.Recorder.Eventf(&machine, corev1.EventTypeNormal, "SwitchCreated", "created switch %s", sw.Name)
	}
	for len(switches) > machine.Spec.Switches {
		if err := r.Delete(ctx, &switches[len(switches)-1]); err != nil {
			return ctrl.Result{}, err
		}
		switches = switches[:len(switches)-1]
	}

	// flip: a switch seen up is set down flipDelay later, one per machine per flipDelay
	now := time.Now()
	var wake time.Duration
	for i := range switches {
		due, err := r.flip(ctx, &machine, &switches[i], now)
		if err != nil {
			return ctrl.Result{}, err
		}
		if due > 0 && (wake == 0 || due < wake) {
			wake = due
		}
	}

	// positions: one letter per switch, as they are now
	positions := make([]byte, len(switches))
	for i, sw := range switches {
		if sw.Spec.Position != "" {
			positions[i] = sw.Spec.Position[0]
		}
	}
	if machine.Status.Positions != string(positions) {
		machine.Status.Positions = string(positions)
		if err := r.Status().Update(ctx, &machine); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: wake}, nil
}

// flip sets sw down if it is due; else it says how long until it is (0:
// it is not up).
func (r *MachineReconciler) flip(ctx context.Context, machine *Machine, sw *Switch, now time.Time) (time.Duration, error) {
	if sw.Spec.Position == "down" {
		return 0, nil
	}
	if sw.Status.SeenAt == nil {
		seen := metav1.NewTime(now)
		sw.Status.SeenAt = &seen
		return flipDelay, r.Status().Update(ctx, sw)
	}

	r.mu.Lock()
	last := r.lastFlip[machine.UID]
	r.mu.Unlock()
	ready := sw.Status.SeenAt.Add(flipDelay)
	if next := last.Add(flipDelay); next.After(ready) {
		ready = next
	}
	if ready.After(now) {
		return ready.Sub(now), nil
	}

	log.FromContext(ctx).Info("flipping switch down", "switch", sw.Name)
	sw.Spec.Position = "down"
	if err := r.Update(ctx, sw); err != nil {
		return 0, err
	}
	// seenAt goes with it: the status subresource, from the updated object
	sw.Status = SwitchStatus{}
	if err := r.Status().Update(ctx, sw); err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.lastFlip[machine.UID] = now
	r.mu.Unlock()
	r.Recorder.Eventf(machine, corev1.EventTypeNormal, "SwitchFlipped", "flipped switch %s down", sw.Name)
	return 0, nil
}
