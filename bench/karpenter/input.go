// Reading the scheduling interchange format (the document `nodewright plan --input` reads)
// into the objects upstream's provisioning scheduler takes.

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/daemonset"
)

// document is the input document as JSON gives it; objects are decoded into API types later.
type document struct {
	Meta struct {
		Options struct {
			IgnorePreferences bool `json:"ignorePreferences"`
		} `json:"options"`
	} `json:"meta"`
	InstanceTypes []instanceType    `json:"instanceTypes"`
	Pods          []json.RawMessage `json:"pods"`
	Nodes         []json.RawMessage `json:"nodes"`
	DaemonSets    []json.RawMessage `json:"daemonSets"`
	NodePool      *json.RawMessage  `json:"nodePool"`
	NodePools     []json.RawMessage `json:"nodePools"`
}

type instanceType struct {
	Name              string            `json:"name"`
	CPU               *float64          `json:"cpu"`
	MemoryMiB         *float64          `json:"memoryMiB"`
	Pods              *float64          `json:"pods"`
	Arch              string            `json:"arch"`
	Labels            map[string]any    `json:"labels"`
	Offerings         []offering        `json:"offerings"`
	CapacityCPU       *float64          `json:"capacityCpu"`
	CapacityMemoryMiB *float64          `json:"capacityMemoryMiB"`
	Resources         map[string]string `json:"resources"`
}

type offering struct {
	Zone                string   `json:"zone"`
	CapacityType        string   `json:"capacityType"`
	Price               *float64 `json:"price"`
	Available           *bool    `json:"available"`
	ReservationID       string   `json:"reservationId"`
	ReservationCapacity int      `json:"reservationCapacity"`
}

// problem is one scheduling problem in upstream's types.
type problem struct {
	source            string
	ignorePreferences bool
	instanceTypes     []*cloudprovider.InstanceType
	nodePools         []*v1.NodePool
	pending           []*corev1.Pod
	bound             []*corev1.Pod
	nodes             []*corev1.Node
	daemonSetPods     []*corev1.Pod
}

func readProblem(path string) (*problem, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc document
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	p := &problem{source: path, ignorePreferences: doc.Meta.Options.IgnorePreferences}
	if len(doc.InstanceTypes) == 0 {
		return nil, fmt.Errorf("%s: instanceTypes: no instance types", path)
	}
	for i, it := range doc.InstanceTypes {
		built, err := buildInstanceType(it)
		if err != nil {
			return nil, fmt.Errorf("%s: instanceTypes[%d]: %w", path, i, err)
		}
		if built != nil {
			p.instanceTypes = append(p.instanceTypes, built)
		}
	}
	if err := p.readObjects(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func (p *problem) readObjects(doc *document) error {
	for i, raw := range doc.Pods {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(raw, pod); err != nil {
			return fmt.Errorf("pods[%d]: %w", i, err)
		}
		if pod.Namespace == "" {
			pod.Namespace = "default"
		}
		if pod.UID == "" {
			// The scheduler caches per-pod data by UID, so every pod needs its own.
			pod.UID = types.UID(pod.Namespace + "/" + pod.Name)
		}
		if pod.Spec.NodeName != "" {
			p.bound = append(p.bound, pod)
		} else {
			p.pending = append(p.pending, pod)
		}
	}
	for i, raw := range doc.Nodes {
		node := &corev1.Node{}
		if err := json.Unmarshal(raw, node); err != nil {
			return fmt.Errorf("nodes[%d]: %w", i, err)
		}
		if node.Spec.ProviderID == "" {
			// Cluster state keys nodes by provider id and ignores a NodePool's node without one.
			node.Spec.ProviderID = "interchange://" + node.Name
		}
		p.nodes = append(p.nodes, node)
	}
	for i, raw := range doc.DaemonSets {
		ds := &appsv1.DaemonSet{}
		if err := json.Unmarshal(raw, ds); err != nil {
			return fmt.Errorf("daemonSets[%d]: %w", i, err)
		}
		p.daemonSetPods = append(p.daemonSetPods, daemonSetPod(ds))
	}
	pools := doc.NodePools
	if doc.NodePool != nil && string(*doc.NodePool) != "null" {
		pools = []json.RawMessage{*doc.NodePool}
	}
	for i, raw := range pools {
		np := &v1.NodePool{}
		if err := json.Unmarshal(raw, np); err != nil {
			return fmt.Errorf("nodePools[%d]: %w", i, err)
		}
		p.nodePools = append(p.nodePools, withDefaults(np))
	}
	if len(p.nodePools) == 0 {
		// The format's default: one NodePool with no requirements and no limits.
		p.nodePools = []*v1.NodePool{withDefaults(&v1.NodePool{})}
	}
	// Templates are tried in weight order, as the provisioner orders them.
	sort.SliceStable(p.nodePools, func(a, b int) bool {
		return weight(p.nodePools[a]) > weight(p.nodePools[b])
	})
	return nil
}

// withDefaults fills what the API server requires of a NodePool and the input may leave out.
func withDefaults(np *v1.NodePool) *v1.NodePool {
	if np.Name == "" {
		np.Name = "default"
	}
	np.UID = types.UID("nodepool-" + np.Name)
	if np.Spec.Template.Spec.NodeClassRef == nil {
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	}
	return np
}

func weight(np *v1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

// daemonSetPod is the pod a DaemonSet would run on a new node; the DaemonSet controller
// replaces the pod's node affinity with the template's required terms.
func daemonSetPod(ds *appsv1.DaemonSet) *corev1.Pod {
	pod := daemonset.PodForDaemonSet(ds)
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	return pod
}

func mib(m float64) resource.Quantity {
	return *resource.NewQuantity(int64(math.Round(m*(1<<20))), resource.BinarySI)
}

func cores(c float64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(math.Round(c*1000)), resource.DecimalSI)
}

// buildInstanceType makes one of upstream's fake instance types with the input's capacity,
// overhead (capacity minus allocatable), labels and offerings; nil for a type with no
// offerings.
func buildInstanceType(it instanceType) (*cloudprovider.InstanceType, error) {
	if it.Name == "" {
		return nil, fmt.Errorf("name: required")
	}
	if it.CPU == nil || it.MemoryMiB == nil {
		return nil, fmt.Errorf("cpu and memoryMiB: required")
	}
	pods := 110.0
	if it.Pods != nil {
		pods = *it.Pods
	}
	capCPU, capMem := *it.CPU, *it.MemoryMiB
	if it.CapacityCPU != nil && *it.CapacityCPU > capCPU {
		capCPU = *it.CapacityCPU
	}
	if it.CapacityMemoryMiB != nil && *it.CapacityMemoryMiB > capMem {
		capMem = *it.CapacityMemoryMiB
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    cores(capCPU),
		corev1.ResourceMemory: mib(capMem),
		corev1.ResourcePods:   *resource.NewQuantity(int64(math.Round(pods)), resource.DecimalSI),
	}
	for name, q := range it.Resources {
		parsed, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("resources.%s: %w", name, err)
		}
		capacity[corev1.ResourceName(name)] = parsed
	}
	var offerings []cloudprovider.Offering
	for i, o := range it.Offerings {
		built, err := buildOffering(o)
		if err != nil {
			return nil, fmt.Errorf("offerings[%d]: %w", i, err)
		}
		offerings = append(offerings, built)
	}
	if len(offerings) == 0 {
		// Nothing can launch it; upstream's fake type would invent offerings, so leave it out.
		return nil, nil
	}
	arch := it.Arch
	if arch == "" {
		arch = v1.ArchitectureAmd64
	}
	var reqs []*scheduling.Requirement
	for _, key := range sets.List(sets.KeySet(it.Labels)) {
		// A cloud provider's instance-type labels are well known (the AWS provider registers
		// its own), so a NodePool or pod may select on them.
		v1.WellKnownLabels.Insert(key)
		value := fmt.Sprint(it.Labels[key])
		reqs = append(reqs, scheduling.NewRequirement(key, corev1.NodeSelectorOpIn, value))
	}
	built := fake.NewInstanceType(it.Name,
		fake.WithResources(capacity),
		fake.WithOfferings(offerings...),
		fake.WithArchitecture(arch),
		fake.WithOperatingSystems(string(corev1.Linux)),
		fake.WithRequirements(reqs...),
	)
	built.Overhead = &cloudprovider.InstanceTypeOverhead{KubeReserved: corev1.ResourceList{
		corev1.ResourceCPU:    cores(capCPU - *it.CPU),
		corev1.ResourceMemory: mib(capMem - *it.MemoryMiB),
	}}
	return built, nil
}

func buildOffering(o offering) (cloudprovider.Offering, error) {
	if o.Price == nil {
		return cloudprovider.Offering{}, fmt.Errorf("price: required")
	}
	switch o.CapacityType {
	case v1.CapacityTypeSpot, v1.CapacityTypeOnDemand, v1.CapacityTypeReserved:
	default:
		return cloudprovider.Offering{}, fmt.Errorf("capacityType: unknown capacity type %q", o.CapacityType)
	}
	labels := map[string]string{
		v1.CapacityTypeLabelKey:  o.CapacityType,
		corev1.LabelTopologyZone: o.Zone,
	}
	if o.ReservationID != "" {
		labels[cloudprovider.ReservationIDLabel] = o.ReservationID
	}
	return cloudprovider.Offering{
		Requirements:        scheduling.NewLabelRequirements(labels),
		Price:               *o.Price,
		Available:           o.Available == nil || *o.Available,
		ReservationCapacity: o.ReservationCapacity,
	}, nil
}
