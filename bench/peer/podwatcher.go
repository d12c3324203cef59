package main

// The pod watcher (operators/pod-watcher.lua): log every pod add, update
// and delete as namespace/name, with client-go's event handlers on the
// manager's shared Pod informer (the pods there at the start are adds).

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
)

func setupPodWatcher(ctx context.Context, mgr ctrl.Manager) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	logger := ctrl.Log.WithName("pod-watcher")
	key := func(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				logger.Info("pod added", "pod", key(pod))
			}
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				logger.Info("pod updated", "pod", key(pod), "phase", pod.Status.Phase)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				logger.Info("pod deleted", "pod", key(pod))
			}
		},
	})
	return err
}
