package main

// The two API groups of manifests/crds, as kubebuilder's *_types.go would
// declare them, with DeepCopy written by hand instead of generated.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	cnatGV    = schema.GroupVersion{Group: "cnat.programming-kubernetes.info", Version: "v1alpha1"}
	uselessGV = schema.GroupVersion{Group: "useless.container.training", Version: "v1alpha1"}

	cnatBuilder    = &scheme.Builder{GroupVersion: cnatGV}
	uselessBuilder = &scheme.Builder{GroupVersion: uselessGV}
)

func init() {
	cnatBuilder.Register(&At{}, &AtList{})
	uselessBuilder.Register(&Machine{}, &MachineList{}, &Switch{}, &SwitchList{})
}

const (
	PhasePending = "PENDING"
	PhaseRunning = "RUNNING"
	PhaseDone    = "DONE"
	PhaseFailed  = "FAILED"
)

type AtSpec struct {
	Schedule string `json:"schedule"`
	Command  string `json:"command"`
}

type AtStatus struct {
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message,omitempty"`
}

type At struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AtSpec   `json:"spec,omitempty"`
	Status            AtStatus `json:"status,omitempty"`
}

type AtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []At `json:"items"`
}

type MachineSpec struct {
	Switches int `json:"switches"`
}

type MachineStatus struct {
	Positions string `json:"positions,omitempty"`
}

type Machine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MachineSpec   `json:"spec,omitempty"`
	Status            MachineStatus `json:"status,omitempty"`
}

type MachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Machine `json:"items"`
}

type SwitchSpec struct {
	Position string `json:"position"`
}

type SwitchStatus struct {
	SeenAt *metav1.Time `json:"seenAt,omitempty"`
}

type Switch struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SwitchSpec   `json:"spec,omitempty"`
	Status            SwitchStatus `json:"status,omitempty"`
}

type SwitchList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Switch `json:"items"`
}

// DeepCopy, by hand: the specs and statuses are plain values except
// Switch.status.seenAt.

func (in *At) DeepCopyInto(out *At) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (in *Machine) DeepCopyInto(out *Machine) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (in *Switch) DeepCopyInto(out *Switch) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.SeenAt = in.Status.SeenAt.DeepCopy()
}

func (in *At) DeepCopyObject() runtime.Object {
	out := new(At)
	in.DeepCopyInto(out)
	return out
}

func (in *Machine) DeepCopyObject() runtime.Object {
	out := new(Machine)
	in.DeepCopyInto(out)
	return out
}

func (in *Switch) DeepCopyObject() runtime.Object {
	out := new(Switch)
	in.DeepCopyInto(out)
	return out
}

func (in *AtList) DeepCopyObject() runtime.Object {
	out := &AtList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]At, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (in *MachineList) DeepCopyObject() runtime.Object {
	out := &MachineList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Machine, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (in *SwitchList) DeepCopyObject() runtime.Object {
	out := &SwitchList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Switch, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
