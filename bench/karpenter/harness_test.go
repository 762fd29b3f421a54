package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A catalog of three sizes in one zone: small (2 cpu, $0.10), medium (4.5 cpu, $0.20) and
// large (8 cpu, $0.40), with 100m cpu and 10Mi held back from each.
func catalog() []map[string]any {
	size := func(name string, cpu, price float64) map[string]any {
		return map[string]any{
			"name": name, "cpu": cpu - 0.1, "memoryMiB": cpu*2048 - 10, "pods": 110,
			"capacityCpu": cpu, "capacityMemoryMiB": cpu * 2048,
			"labels":    map[string]string{"example.com/size": name},
			"offerings": []map[string]any{{"zone": "zone-a", "capacityType": "on-demand", "price": price}},
		}
	}
	return []map[string]any{size("small", 2, 0.10), size("medium", 4.6, 0.20), size("large", 8.1, 0.40)}
}

func pod(name string, cpu string, labels map[string]string, affinity map[string]any) map[string]any {
	spec := map[string]any{"containers": []map[string]any{{
		"name": "main", "resources": map[string]any{"requests": map[string]string{"cpu": cpu, "memory": "128Mi"}},
	}}}
	if affinity != nil {
		spec["affinity"] = affinity
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default", "labels": labels},
		"spec":     spec}
}

func solveDoc(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	text, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := solveFile(path, 2, &out); err != nil {
		t.Fatal(err)
	}
	var answer map[string]any
	if err := json.Unmarshal([]byte(out.String()), &answer); err != nil {
		t.Fatal(err)
	}
	return answer
}

func TestFourOneCPUPodsShareOneMediumNode(t *testing.T) {
	var pods []map[string]any
	for i := range 4 {
		pods = append(pods, pod(fmt.Sprintf("web-%d", i), "1", map[string]string{"app": "web"}, nil))
	}
	answer := solveDoc(t, map[string]any{"instanceTypes": catalog(), "pods": pods})
	want := map[string]any{"pods": 4.0, "scheduled": 4.0, "podErrors": 0.0, "nodeClaims": 1.0, "totalCheapestPricePerHour": 0.2}
	for k, v := range want {
		if answer[k] != v {
			t.Errorf("%s = %v, want %v (answer %v)", k, answer[k], v, answer)
		}
	}
	claim := answer["perNodeClaim"].([]any)[0].(map[string]any)
	if claim["cheapestInstanceType"] != "medium" || claim["cheapestZone"] != "zone-a" {
		t.Errorf("claim %v, want the medium type in zone-a", claim)
	}
}

func TestAntiAffinityNodePoolAndAPodThatFitsNowhere(t *testing.T) {
	anti := map[string]any{"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []map[string]any{{
		"labelSelector": map[string]any{"matchLabels": map[string]string{"app": "db"}},
		"topologyKey":   "kubernetes.io/hostname",
	}}}}
	pods := []map[string]any{
		pod("db-0", "500m", map[string]string{"app": "db"}, anti),
		pod("db-1", "500m", map[string]string{"app": "db"}, anti),
		pod("db-2", "500m", map[string]string{"app": "db"}, anti),
		pod("huge", "64", map[string]string{"app": "huge"}, nil),
	}
	// The NodePool leaves out the small size, so each db pod gets a medium node of its own.
	pool := map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": "general"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"requirements": []map[string]any{{"key": "example.com/size", "operator": "NotIn", "values": []string{"small"}}},
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
		}}}}
	answer := solveDoc(t, map[string]any{"instanceTypes": catalog(), "pods": pods, "nodePool": pool})
	want := map[string]any{"pods": 4.0, "scheduled": 3.0, "podErrors": 1.0, "nodeClaims": 3.0, "totalCheapestPricePerHour": 0.6}
	for k, v := range want {
		if answer[k] != v {
			t.Errorf("%s = %v, want %v (answer %v)", k, answer[k], v, answer)
		}
	}
	errs := answer["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["pod"] != "default/huge" {
		t.Errorf("errors %v, want only default/huge", errs)
	}
}

func TestExistingNodeTakesPodsFirst(t *testing.T) {
	node := map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "node-1", "labels": map[string]string{
			"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "zone-a",
			"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}},
		"status": map[string]any{
			"allocatable": map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"},
			"capacity":    map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"},
			"conditions":  []map[string]string{{"type": "Ready", "status": "True"}}}}
	running := pod("running", "2500m", map[string]string{"app": "old"}, nil)
	running["spec"].(map[string]any)["nodeName"] = "node-1"
	running["status"] = map[string]string{"phase": "Running"}
	// 1.5 cpu is free on node-1: one 1-cpu pod goes there; the other two need a new node,
	// and more than the small size's 1.9 cpu.
	pods := []map[string]any{running,
		pod("web-0", "1", nil, nil), pod("web-1", "1", nil, nil), pod("web-2", "1", nil, nil)}
	answer := solveDoc(t, map[string]any{"instanceTypes": catalog(), "pods": pods, "nodes": []any{node}})
	want := map[string]any{"pods": 3.0, "scheduled": 3.0, "existingNodePods": 1.0, "nodeClaims": 1.0, "totalCheapestPricePerHour": 0.2}
	for k, v := range want {
		if answer[k] != v {
			t.Errorf("%s = %v, want %v (answer %v)", k, answer[k], v, answer)
		}
	}
}

func TestBadInputNamesTheField(t *testing.T) {
	its := catalog()
	its[1]["offerings"] = []map[string]any{{"zone": "zone-a", "capacityType": "cheap", "price": 1}}
	text, _ := json.Marshal(map[string]any{"instanceTypes": its})
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := readProblem(path)
	if err == nil || !strings.Contains(err.Error(), `instanceTypes[1]: offerings[0]: capacityType: unknown capacity type "cheap"`) {
		t.Fatalf("error %v", err)
	}
}
