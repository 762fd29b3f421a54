// nodewright's instance-type catalog (the interchange `instanceTypes` that `nodewright catalog`
// writes) in the format of the kwok provider's INSTANCE_TYPES_FILE_PATH, written
// with the provider's own types so the file is exactly what it reads.

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

// The kwok provider holds back this much of every instance type (its fixed kube-reserved);
// the exported capacity adds it so the Node's allocatable is nodewright's.
const (
	kwokReservedMilliCPU = 100
	kwokReservedMiB      = 10
)

type catalogDoc struct {
	InstanceTypes []catalogType `json:"instanceTypes"`
}

type catalogType struct {
	Name      string            `json:"name"`
	CPU       float64           `json:"cpu"`
	MemoryMiB float64           `json:"memoryMiB"`
	Pods      float64           `json:"pods"`
	Arch      string            `json:"arch"`
	Labels    map[string]any    `json:"labels"`
	Offerings []catalogOffering `json:"offerings"`
	Resources map[string]string `json:"resources"`
}

type catalogOffering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Available    bool    `json:"available"`
}

// convertCatalog reads an interchange document and returns the kwok provider's instance
// types: the same allocatable cpu, memory, pods and extended resources, and one offering per
// available (zone, capacity type) at the same price. The type's labels (category, generation,
// family, ...) become requirements of each offering, the one place the provider takes extra
// labels from, so a NodePool can select on them as it would on AWS.
func convertCatalog(path string) ([]kwok.InstanceTypeOptions, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc catalogDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: not an interchange document: %w", path, err)
	}
	if len(doc.InstanceTypes) == 0 {
		return nil, fmt.Errorf("%s: instanceTypes is empty", path)
	}
	var out []kwok.InstanceTypeOptions
	for i, it := range doc.InstanceTypes {
		opts, err := convertType(it)
		if err != nil {
			return nil, fmt.Errorf("%s: instanceTypes[%d] (%s): %w", path, i, it.Name, err)
		}
		if len(opts.Offerings) > 0 {
			out = append(out, opts)
		}
	}
	return out, nil
}

func convertType(it catalogType) (kwok.InstanceTypeOptions, error) {
	if it.Name == "" || it.Arch == "" {
		return kwok.InstanceTypeOptions{}, fmt.Errorf("name and arch are required")
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU: *resource.NewMilliQuantity(
			int64(math.Round(it.CPU*1000))+kwokReservedMilliCPU, resource.DecimalSI),
		// To the byte: the allocatable of a VM-overhead share is not a whole MiB.
		corev1.ResourceMemory: *resource.NewQuantity(
			int64(math.Round(it.MemoryMiB*(1<<20)))+kwokReservedMiB<<20, resource.BinarySI),
		corev1.ResourcePods: *resource.NewQuantity(int64(it.Pods), resource.DecimalSI),
	}
	for name, v := range it.Resources {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return kwok.InstanceTypeOptions{}, fmt.Errorf("resources.%s: %w", name, err)
		}
		res[corev1.ResourceName(name)] = q
	}
	labels := labelRequirements(it.Labels)
	var offerings kwok.KWOKOfferings
	for _, o := range it.Offerings {
		if !o.Available {
			// The provider marks every offering it reads available.
			continue
		}
		reqs := []corev1.NodeSelectorRequirement{
			{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{o.CapacityType}},
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{o.Zone}},
		}
		offerings = append(offerings, kwok.KWOKOffering{
			Offering:     cloudprovider.Offering{Price: o.Price, Available: true},
			Requirements: append(reqs, labels...),
		})
	}
	return kwok.InstanceTypeOptions{
		Name:             it.Name,
		Offerings:        offerings,
		Architecture:     it.Arch,
		OperatingSystems: []corev1.OSName{corev1.Linux},
		Resources:        res,
	}, nil
}

// labelRequirements turns the type's labels into `In [value]` requirements, sorted by key;
// zone and capacity type are the offering's own and are left out.
func labelRequirements(labels map[string]any) []corev1.NodeSelectorRequirement {
	var keys []string
	for k := range labels {
		if k != corev1.LabelTopologyZone && k != v1.CapacityTypeLabelKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]corev1.NodeSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		out = append(out, corev1.NodeSelectorRequirement{
			Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprint(labels[k])},
		})
	}
	return out
}

func writeInstanceTypes(input, output string) error {
	types, err := convertCatalog(input)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(types)
	if err != nil {
		return err
	}
	return os.WriteFile(output, raw, 0o644)
}
