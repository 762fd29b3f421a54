package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	kwokoptions "sigs.k8s.io/karpenter/kwok/options"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// Two types as nodewright's catalog lists them: one with an unavailable offering and a GPU,
// one whose every offering is unavailable.
const catalog = `{"instanceTypes": [
 {"name": "g5.xlarge", "cpu": 3.92, "memoryMiB": 14162.0, "pods": 58, "arch": "amd64",
  "resources": {"nvidia.com/gpu": "1"},
  "labels": {"karpenter.k8s.aws/instance-category": "g", "karpenter.k8s.aws/instance-generation": "5",
             "topology.kubernetes.io/zone": "us-east-1a"},
  "offerings": [
   {"zone": "us-east-1a", "capacityType": "on-demand", "price": 1.006, "available": true},
   {"zone": "us-east-1a", "capacityType": "spot", "price": 0.3, "available": true},
   {"zone": "us-east-1b", "capacityType": "spot", "price": 0.31, "available": false}]},
 {"name": "a1.large", "cpu": 1.93, "memoryMiB": 3000.0, "pods": 29, "arch": "arm64",
  "labels": {"karpenter.k8s.aws/instance-category": "a"},
  "offerings": [{"zone": "us-east-1a", "capacityType": "spot", "price": 0.02, "available": false}]}
]}`

// The written file, read back by upstream's own loader, gives nodewright's allocatable,
// the available offerings at their prices, and offerings a NodePool can select by label.
func TestInstanceTypesRoundTripThroughUpstreamLoader(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "catalog.json"), filepath.Join(dir, "kwok.json")
	if err := os.WriteFile(in, []byte(catalog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeInstanceTypes(in, out); err != nil {
		t.Fatal(err)
	}
	ctx := kwokoptions.ToContext(context.Background(), &kwokoptions.Options{InstanceTypesFilePath: out})
	types, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != 1 || types[0].Name != "g5.xlarge" {
		t.Fatalf("want only g5.xlarge (a1.large has no available offering), got %d types", len(types))
	}
	it := types[0]
	alloc := it.Allocatable()
	for name, want := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: "3920m", corev1.ResourceMemory: "14162Mi", corev1.ResourcePods: "58",
		"nvidia.com/gpu": "1",
	} {
		got := alloc[name]
		if got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), want)
		}
	}
	if len(it.Offerings) != 2 {
		t.Fatalf("want the 2 available offerings, got %d", len(it.Offerings))
	}
	spot := scheduling.NewRequirements(
		scheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"),
		scheduling.NewRequirement("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "g"),
		scheduling.NewRequirement("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "2"),
	)
	compatible := it.Offerings.Compatible(spot)
	if len(compatible) != 1 || compatible[0].Price != 0.3 {
		t.Fatalf("want the one spot offering at 0.3, got %v", compatible)
	}
	older := scheduling.NewRequirements(
		scheduling.NewRequirement("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "5"),
	)
	if got := it.Offerings.Compatible(older); len(got) != 0 {
		t.Fatalf("generation 5 is not > 5, yet %d offerings match", len(got))
	}
}

// nodewright's own export (`nodewright catalog`, its path in NODEWRIGHT_CATALOG, as
// scripts/test sets it), read back by upstream's loader: every type with an available offering
// is there, with nodewright's allocatable cpu, memory and pods, so both controllers see the
// same per-node overhead.
func TestNodewrightsExportThroughUpstreamLoader(t *testing.T) {
	in := os.Getenv("NODEWRIGHT_CATALOG")
	if in == "" {
		t.Skip("NODEWRIGHT_CATALOG names no export of `nodewright catalog`")
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var doc catalogDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "kwok.json")
	if err := writeInstanceTypes(in, out); err != nil {
		t.Fatal(err)
	}
	ctx := kwokoptions.ToContext(context.Background(), &kwokoptions.Options{InstanceTypesFilePath: out})
	types, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]corev1.ResourceList{}
	for _, it := range types {
		loaded[it.Name] = it.Allocatable()
	}
	want := 0
	for _, it := range doc.InstanceTypes {
		if !slices.ContainsFunc(it.Offerings, func(o catalogOffering) bool { return o.Available }) {
			continue
		}
		want++
		alloc, ok := loaded[it.Name]
		if !ok {
			t.Errorf("%s: not loaded", it.Name)
			continue
		}
		cpu, mem, pods := alloc[corev1.ResourceCPU], alloc[corev1.ResourceMemory], alloc[corev1.ResourcePods]
		if cpu.MilliValue() != int64(math.Round(it.CPU*1000)) || mem.Value() != int64(math.Round(it.MemoryMiB*(1<<20))) ||
			pods.Value() != int64(it.Pods) {
			t.Errorf("%s: allocatable %s cpu, %s memory, %s pods; nodewright's %.3f cpu, %.0f MiB, %.0f pods",
				it.Name, cpu.String(), mem.String(), pods.String(), it.CPU, it.MemoryMiB, it.Pods)
		}
	}
	if want < 500 || len(types) != want {
		t.Fatalf("%d types loaded of %d with an available offering", len(types), want)
	}
}
