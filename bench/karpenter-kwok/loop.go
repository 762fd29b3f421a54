// The measured part of the whole-loop benchmark, the same for both controllers (nodewright
// with its sim cloud, upstream's kwok provider with kwok): `inflate` 0 -> N pods of one CPU,
// seconds from the last pod created to all bound, nodes and $/h at the peak; N -> N/2 and
// N/2 -> 0, each until no NodeClaim has been created or deleted for three minutes, with the
// nodes and $/h then; the controller's (and a separate node agent's) CPU seconds and peak RSS
// over the whole run. Prices are the instance-types file's, for both.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

type loopConfig struct {
	kubeconfig       string
	pods             int
	instanceTypes    string
	side             string
	consolidateAfter string
	controllerPID    int
	agentPID         int
	result           string
	// Stop after the peak: no scale-down (to iterate on the scale-up alone).
	scaleUpOnly bool
}

// result is one run's figures, as `table` reads them back.
type result struct {
	Side             string  `json:"side"`
	ConsolidateAfter string  `json:"consolidateAfter"`
	Pods             int     `json:"pods"`
	LastCreated      float64 `json:"lastCreatedSeconds"`
	BoundAfterLast   float64 `json:"boundAfterLastSeconds"`
	Peak             state   `json:"peak"`
	Half             settled `json:"half"`
	Zero             settled `json:"zero"`
	ControllerCPU    float64 `json:"controllerCpuSeconds"`
	ControllerRSS    float64 `json:"controllerPeakRssMiB"`
	// A node agent in a process of its own (kwok); zero when it lives in the controller.
	AgentCPU float64 `json:"agentCpuSeconds"`
	AgentRSS float64 `json:"agentPeakRssMiB"`
}

type state struct {
	Nodes int     `json:"nodes"`
	Cost  float64 `json:"costPerHour"`
}

type settled struct {
	// From the scale to the last NodeClaim created or deleted.
	Seconds float64 `json:"seconds"`
	state
}

type cluster struct {
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	prices map[offeringKey]float64
}

type offeringKey struct{ instanceType, zone, capacityType string }

var nodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

func runLoop(ctx context.Context, c loopConfig) error {
	rest, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	// The benchmark's own polls must not be slowed by client-side rate limits.
	rest.QPS, rest.Burst = 1000, 2000
	cl := &cluster{kube: kubernetes.NewForConfigOrDie(rest), dyn: dynamic.NewForConfigOrDie(rest)}
	if cl.prices, err = readPrices(c.instanceTypes); err != nil {
		return err
	}
	n := c.pods
	r := result{Side: c.side, ConsolidateAfter: c.consolidateAfter, Pods: n}
	if _, err := cl.kube.AppsV1().Deployments("default").Create(ctx, inflate(n), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment inflate: %w", err)
	}
	lastCreated, boundAt, err := cl.waitBound(ctx, n)
	if err != nil {
		return err
	}
	r.LastCreated, r.BoundAfterLast = lastCreated.Seconds(), (boundAt - lastCreated).Seconds()
	fmt.Printf("bench cluster: %s, %d pods of 1 cpu, consolidateAfter %s\n", c.side, n, c.consolidateAfter)
	fmt.Printf("  all bound %.2f s after the last pod was created (last created at %.2f s, all bound at %.2f s)\n",
		r.BoundAfterLast, r.LastCreated, boundAt.Seconds())
	if r.Peak.Nodes, r.Peak.Cost, err = cl.cost(ctx); err != nil {
		return err
	}
	fmt.Printf("  peak: %d nodes, $%.3f/h (controller CPU so far %.1f s)\n", r.Peak.Nodes, r.Peak.Cost, cpuSoFar(c.controllerPID))
	steps := []struct {
		replicas int
		out      *settled
	}{{n / 2, &r.Half}, {0, &r.Zero}}
	if c.scaleUpOnly {
		steps = nil
	}
	for _, step := range steps {
		took, nodes, cost, err := cl.scaleAndSettle(ctx, step.replicas)
		if err != nil {
			return err
		}
		*step.out = settled{Seconds: took.Seconds(), state: state{Nodes: nodes, Cost: cost}}
		fmt.Printf("  scale to %d: consolidation done %.1f s after the scale; %d nodes, $%.3f/h (controller CPU so far %.1f s)\n",
			step.replicas, took.Seconds(), nodes, cost, cpuSoFar(c.controllerPID))
	}
	r.ControllerCPU, r.ControllerRSS = usage(c.controllerPID)
	fmt.Printf("  controller, whole run: %.1f CPU seconds, peak RSS %.0f MiB\n", r.ControllerCPU, r.ControllerRSS)
	if c.agentPID != 0 {
		r.AgentCPU, r.AgentRSS = usage(c.agentPID)
		fmt.Printf("  node agent (a separate process), whole run: %.1f CPU seconds, peak RSS %.0f MiB\n", r.AgentCPU, r.AgentRSS)
	}
	if c.result == "" {
		return nil
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.result, append(raw, '\n'), 0o644)
}

func inflate(replicas int) *appsv1.Deployment {
	labels := map[string]string{"app": "inflate"}
	r := int32(replicas)
	grace := int64(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &r,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:  "inflate",
						Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1"),
						}},
					}},
				},
			},
		},
	}
}

// waitBound polls the pods every 100 ms until n exist and all are bound; it returns when the
// last one appeared and when all were bound, counted from the Deployment's creation (local
// times: the API's timestamps have a one-second grain).
func (cl *cluster) waitBound(ctx context.Context, n int) (lastCreated, boundAt time.Duration, err error) {
	start := time.Now()
	seen := 0
	for {
		pods, err := cl.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, err
		}
		if len(pods.Items) > seen {
			seen = len(pods.Items)
			lastCreated = time.Since(start)
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if len(pods.Items) == n && bound == n {
			return lastCreated, time.Since(start), nil
		}
		if time.Since(start) > 15*time.Minute {
			return 0, 0, fmt.Errorf("%d of %d bound after 15 min", bound, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scaleAndSettle scales inflate to replicas and waits until no NodeClaim is deleting and none
// has been created or deleted for three minutes; it returns the time from the scale to the
// last change, and the nodes and $/h then.
func (cl *cluster) scaleAndSettle(ctx context.Context, replicas int) (time.Duration, int, float64, error) {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := cl.kube.AppsV1().Deployments("default").Patch(ctx, "inflate", types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		return 0, 0, 0, fmt.Errorf("scaling inflate to %d: %w", replicas, err)
	}
	scaled := time.Now()
	lastChange := time.Now()
	shape := map[string]bool{}
	for {
		list, err := cl.dyn.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, 0, err
		}
		now := map[string]bool{}
		deleting := false
		for _, c := range list.Items {
			d := c.GetDeletionTimestamp() != nil
			now[c.GetName()] = d
			deleting = deleting || d
		}
		if !maps.Equal(now, shape) {
			shape = now
			lastChange = time.Now()
		}
		if !deleting && time.Since(lastChange) >= 3*time.Minute {
			nodes, cost, err := cl.cost(ctx)
			return lastChange.Sub(scaled), nodes, cost, err
		}
		if time.Since(scaled) > 30*time.Minute {
			return 0, 0, 0, fmt.Errorf("consolidation still changing 30 min after the scale to %d", replicas)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// cost is the cluster's nodes and their $/h at the instance-types file's prices.
func (cl *cluster) cost(ctx context.Context) (int, float64, error) {
	nodes, err := cl.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	total := 0.0
	for _, n := range nodes.Items {
		l := n.Labels
		price, ok := cl.prices[offeringKey{l[corev1.LabelInstanceTypeStable], l[corev1.LabelTopologyZone], l[v1.CapacityTypeLabelKey]}]
		if !ok {
			return 0, 0, fmt.Errorf("node %s: no price for its instance type, zone and capacity type", n.Name)
		}
		total += price
	}
	return len(nodes.Items), total, nil
}

func readPrices(path string) (map[offeringKey]float64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var types []kwok.InstanceTypeOptions
	if err := json.Unmarshal(raw, &types); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[offeringKey]float64{}
	for _, it := range types {
		for _, o := range it.Offerings {
			k := offeringKey{instanceType: it.Name}
			for _, r := range o.Requirements {
				switch {
				case r.Key == corev1.LabelTopologyZone && len(r.Values) == 1:
					k.zone = r.Values[0]
				case r.Key == v1.CapacityTypeLabelKey && len(r.Values) == 1:
					k.capacityType = r.Values[0]
				}
			}
			out[k] = o.Price
		}
	}
	return out, nil
}
