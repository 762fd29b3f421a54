// Running upstream's provisioning scheduler on a problem, set up as its scheduling benchmark
// sets it up, and summing up the result in the interchange output format.

package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"
)

// run is one solve: the scheduler's results and how long building it and solving took.
type run struct {
	results scheduling.Results
	pending []*corev1.Pod
	setup   time.Duration
	solve   time.Duration
}

// solveOnce builds a fresh cluster state and scheduler for the problem and solves it once.
// Only Solve is in `solve`, as upstream's benchmark times it; building the topology and the
// scheduler is in `setup`.
func solveOnce(p *problem) (*run, error) {
	ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
	// Relaxing preferences edits pods in place, so each run gets its own copies.
	pending := lo.Map(p.pending, func(pod *corev1.Pod, _ int) *corev1.Pod { return pod.DeepCopy() })
	started := time.Now()
	cloudProvider := fake.NewCloudProvider()
	cloudProvider.InstanceTypes = p.instanceTypes
	kube, err := clusterClient(p)
	if err != nil {
		return nil, err
	}
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, kube, cloudProvider)
	for _, n := range p.nodes {
		if err := cluster.UpdateNode(ctx, n.DeepCopy()); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, pod := range p.bound {
		if err := cluster.UpdatePod(ctx, pod.DeepCopy()); err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	stateNodes := cluster.DeepCopyNodes().Active()
	instanceTypes := map[string][]*cloudprovider.InstanceType{}
	for _, np := range p.nodePools {
		instanceTypes[np.Name] = p.instanceTypes
	}
	opts := []scheduling.Options{scheduling.NumConcurrentReconciles(5)}
	if p.ignorePreferences {
		opts = append(opts, scheduling.IgnorePreferences)
	}
	topology, err := scheduling.NewTopology(ctx, kube, cluster, stateNodes, p.nodePools, instanceTypes, pending, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating topology: %w", err)
	}
	scheduler := scheduling.NewScheduler(ctx, kube, p.nodePools, cluster, stateNodes, topology, instanceTypes,
		p.daemonSetPods, events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, opts...)
	setup := time.Since(started)
	started = time.Now()
	results, err := scheduler.Solve(ctx, pending)
	if err != nil {
		return nil, fmt.Errorf("solving: %w", err)
	}
	return &run{results: results, pending: pending, setup: setup, solve: time.Since(started)}, nil
}

// clusterClient is a fake API client holding the existing nodes and the pods bound to them,
// indexed by node name as the cluster state lists them.
func clusterClient(p *problem) (client.Client, error) {
	objects := make([]client.Object, 0, len(p.nodes)+len(p.bound))
	for _, n := range p.nodes {
		objects = append(objects, n.DeepCopy())
	}
	for _, pod := range p.bound {
		objects = append(objects, pod.DeepCopy())
	}
	return fakecr.NewClientBuilder().
		WithObjects(objects...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).
		Build(), nil
}

// cheapest is the cheapest available offering among a claim's instance-type options that its
// requirements allow.
func cheapest(nc *scheduling.NodeClaim) (*cloudprovider.InstanceType, *cloudprovider.Offering) {
	var bestType *cloudprovider.InstanceType
	var best *cloudprovider.Offering
	for _, it := range nc.InstanceTypeOptions {
		o := it.Offerings.Available().Compatible(nc.Requirements).Cheapest()
		if o != nil && (best == nil || o.Price < best.Price) {
			bestType, best = it, o
		}
	}
	return bestType, best
}

func round(x float64, digits int) float64 {
	f := math.Pow(10, float64(digits))
	return math.Round(x*f) / f
}

// output is the interchange output document of one run.
func output(p *problem, r *run) map[string]any {
	total := 0.0
	claims := make([]map[string]any, 0, len(r.results.NewNodeClaims))
	scheduled := 0
	for _, nc := range r.results.NewNodeClaims {
		scheduled += len(nc.Pods)
		it, o := cheapest(nc)
		claim := map[string]any{
			"nodePool":          nc.NodePoolName,
			"instanceTypes":     lo.Map(lo.Slice(nc.InstanceTypeOptions.OrderByPrice(nc.Requirements), 0, 5), func(it *cloudprovider.InstanceType, _ int) string { return it.Name }),
			"instanceTypeCount": len(nc.InstanceTypeOptions),
			"pods":              len(nc.Pods),
		}
		if o != nil {
			total += o.Price
			claim["cheapestPrice"] = round(o.Price, 6)
			claim["cheapestInstanceType"] = it.Name
			claim["cheapestZone"] = o.Zone()
			claim["cheapestCapacityType"] = o.CapacityType()
		}
		claims = append(claims, claim)
	}
	existing := 0
	for _, n := range r.results.ExistingNodes {
		existing += len(n.Pods)
	}
	errors := make([]map[string]any, 0, len(r.results.PodErrors))
	for pod, err := range r.results.PodErrors {
		errors = append(errors, map[string]any{"pod": pod.Namespace + "/" + pod.Name, "reason": err.Error()})
	}
	sort.Slice(errors, func(i, j int) bool { return errors[i]["pod"].(string) < errors[j]["pod"].(string) })
	return map[string]any{
		"planner":                   "karpenter " + karpenterVersion(),
		"pods":                      len(p.pending),
		"scheduled":                 scheduled + existing,
		"podErrors":                 len(r.results.PodErrors),
		"nodeClaims":                len(r.results.NewNodeClaims),
		"existingNodePods":          existing,
		"totalCheapestPricePerHour": round(total, 6),
		"solveSeconds":              round(r.solve.Seconds(), 6),
		"setupSeconds":              round(r.setup.Seconds(), 6),
		"perNodeClaim":              claims,
		"errors":                    errors,
	}
}
