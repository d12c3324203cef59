package main

// The validating webhook of operators/webhooks/at-webhooks.lua, as a
// kubebuilder user writes it (a CustomValidator registered with
// ctrl.NewWebhookManagedBy, served on /validate-cnat-programming-kubernetes-info-v1alpha1-at):
// the command's first word must be on the allow-list, and a schedule more
// than a year (365 days) ahead is refused, each with the reason; a
// schedule in the past is admitted with a warning. Only --operators
// at-webhook runs it (bench/webhook.sh); the other benchmarks never start
// the webhook server.

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// atAllowed is the allow-list of the command's first word.
var atAllowed = map[string]bool{"echo": true, "date": true, "sleep": true, "true": true, "env": true}

// atHorizon is how far ahead a schedule may be.
const atHorizon = 365 * 24 * time.Hour

type AtValidator struct{}

func (v *AtValidator) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr).For(&At{}).WithValidator(v).Complete()
}

func (v *AtValidator) validate(obj runtime.Object) (admission.Warnings, error) {
	at, ok := obj.(*At)
	if !ok {
		return nil, fmt.Errorf("expected an At, got %T", obj)
	}
	words := strings.Fields(at.Spec.Command)
	if len(words) == 0 || !atAllowed[words[0]] {
		first := ""
		if len(words) > 0 {
			first = words[0]
		}
		return nil, fmt.Errorf("spec.command: %q is not an allowed command (allowed: date, echo, env, sleep, true)", first)
	}
	// (the schema refused a schedule that does not parse)
	when, err := time.Parse(time.RFC3339, at.Spec.Schedule)
	if err != nil {
		return nil, nil
	}
	if time.Until(when) > atHorizon {
		return nil, fmt.Errorf("spec.schedule: %s is more than a year ahead", at.Spec.Schedule)
	}
	if time.Until(when) < 0 {
		return admission.Warnings{"spec.schedule is in the past: the At runs at once"}, nil
	}
	return nil, nil
}

func (v *AtValidator) ValidateCreate(_ context.Context, obj runtime.Object) (admission.Warnings, error) {
	return v.validate(obj)
}

func (v *AtValidator) ValidateUpdate(_ context.Context, _, obj runtime.Object) (admission.Warnings, error) {
	return v.validate(obj)
}

func (v *AtValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// webhookServer is the server kubebuilder v4's scaffold makes: HTTP/2 off
// unless --enable-http2 (its default), the certificate from CertDir.
func webhookServer(host string, port int, certDir string, http2 bool) webhook.Server {
	var tlsOpts []func(*tls.Config)
	if !http2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, TLSOpts: tlsOpts})
}
