package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Results written by two runs of each side at one consolidateAfter, read back from files: each
// row shows the lowest run's figure first, then every run's; nodewright's column comes first.
func TestTableKeepsTheBestOfEachRow(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, r := range []result{
		{Side: "upstream", ConsolidateAfter: "0s", Pods: 10, BoundAfterLast: 9.5,
			Peak: state{3, 1.5}, Half: settled{40, state{2, 1.0}}, Zero: settled{30, state{0, 0}},
			ControllerCPU: 8, ControllerRSS: 250, AgentCPU: 2, AgentRSS: 80},
		{Side: "nodewright", ConsolidateAfter: "0s", Pods: 10, BoundAfterLast: 2.3,
			Peak: state{4, 1.25}, Half: settled{20, state{2, 0.75}}, Zero: settled{10, state{0, 0}},
			ControllerCPU: 3, ControllerRSS: 120},
		{Side: "upstream", ConsolidateAfter: "0s", Pods: 10, BoundAfterLast: 11,
			Peak: state{2, 1.0}, Half: settled{35, state{2, 1.0}}, Zero: settled{31, state{0, 0}},
			ControllerCPU: 9, ControllerRSS: 240, AgentCPU: 3, AgentRSS: 70},
	} {
		raw, _ := json.Marshal(r)
		p := filepath.Join(dir, string(rune('a'+i))+".json")
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	rs, err := readResults(paths)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"| 10 pods, best of 2 | nodewright, `consolidateAfter: 0s` | upstream, `consolidateAfter: 0s` |",
		"| all pods bound after the last was created | 2.3 s | 9.5 s (runs: 9.5 s; 11.0 s) |",
		"| nodes and $/h at the peak | 4, $1.250/h | 2, $1.000/h (runs: 3, $1.500/h; 2, $1.000/h) |",
		"| 10 → 5: consolidation done after the scale | 20.0 s | 35.0 s (runs: 40.0 s; 35.0 s) |",
		"| controller peak RSS | 120 MiB | 240 MiB (runs: 250 MiB; 240 MiB) |",
		"| node agent CPU and peak RSS | in the controller | 2.0 s, 80 MiB (runs: 2.0 s, 80 MiB; 3.0 s, 70 MiB) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if _, err := readResults([]string{filepath.Join(dir, "missing.json")}); err == nil {
		t.Error("a missing file is an error")
	}
}
