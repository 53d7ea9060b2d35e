package main

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// manifests reads every object of deploy/kubernetes, by kind and name.
func manifests(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests (%v)", err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			var obj map[string]any
			if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			key := str(t, obj, "kind") + "/" + str(t, obj, "metadata", "name")
			if out[key] != nil {
				t.Fatalf("%s twice", key)
			}
			out[key] = obj
		}
	}
	return out
}

// get walks maps by key and lists by decimal index.
func get(t *testing.T, v any, path ...string) any {
	t.Helper()
	for i, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(c) {
				t.Fatalf("no %s at %s", p, strings.Join(path[:i], "."))
			}
			v = c[n]
		default:
			t.Fatalf("%s is not a map or list", strings.Join(path[:i], "."))
		}
		if v == nil {
			t.Fatalf("no %s", strings.Join(path[:i+1], "."))
		}
	}
	return v
}

func str(t *testing.T, v any, path ...string) string {
	t.Helper()
	s, ok := get(t, v, path...).(string)
	if !ok {
		t.Fatalf("%s is not a string", strings.Join(path, "."))
	}
	return s
}

func num(t *testing.T, v any, path ...string) int {
	t.Helper()
	f, ok := get(t, v, path...).(float64)
	if !ok {
		t.Fatalf("%s is not a number", strings.Join(path, "."))
	}
	return int(f)
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKubernetesManifests checks that the manifests agree with the code:
// the Deployment's arguments parse as `prefixd serve` flags, and ports,
// selectors, probes, grace period and block size line up across objects.
func TestKubernetesManifests(t *testing.T) {
	objs := manifests(t)
	dep, svc, pool := objs["Deployment/prefixd"], objs["Service/prefixd"], objs["InferencePool/prefixd"]
	epp, eppSvc, eppCfg := objs["Deployment/prefixd-epp"], objs["Service/prefixd-epp"], objs["ConfigMap/prefixd-epp"]
	for name, o := range map[string]map[string]any{"Deployment/prefixd": dep, "Service/prefixd": svc, "InferencePool/prefixd": pool,
		"Deployment/prefixd-epp": epp, "Service/prefixd-epp": eppSvc, "ConfigMap/prefixd-epp": eppCfg} {
		if o == nil {
			t.Fatalf("no %s", name)
		}
	}
	if v := str(t, pool, "apiVersion"); v != "inference.networking.k8s.io/v1" {
		t.Errorf("InferencePool apiVersion %s", v)
	}

	c := get(t, dep, "spec", "template", "spec", "containers", "0")
	args := get(t, c, "args").([]any)
	if args[0] != "serve" {
		t.Fatalf("container args start %v, want serve", args[0])
	}
	var flags []string
	for _, a := range args[1:] {
		flags = append(flags, a.(string))
	}
	var stderr bytes.Buffer
	o, err := parseServe(flags, nil, &stderr)
	if err != nil {
		t.Fatalf("the Deployment's flags do not parse: %v\n%s", err, stderr.String())
	}

	// Selectors and labels.
	labels := get(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
	for what, sel := range map[string]any{
		"Deployment selector":    get(t, dep, "spec", "selector", "matchLabels"),
		"Service selector":       get(t, svc, "spec", "selector"),
		"InferencePool selector": get(t, pool, "spec", "selector", "matchLabels"),
	} {
		for k, v := range sel.(map[string]any) {
			if labels[k] != v {
				t.Errorf("%s %s=%v does not match the pod labels %v", what, k, v, labels)
			}
		}
	}

	// Ports: the container's named ports are what the flags listen on.
	ports := map[string]int{}
	for _, p := range get(t, c, "ports").([]any) {
		ports[str(t, p, "name")] = num(t, p, "containerPort")
	}
	kv, err := url.Parse(o.kvEvents.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	replay, err := url.Parse(o.kvEvents.replay)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"http": port(t, o.addr), "kv-events": port(t, kv.Host), "kv-replay": port(t, replay.Host)} {
		if ports[name] != want {
			t.Errorf("container port %s = %d, the flags listen on %d", name, ports[name], want)
		}
	}
	if ports["kv-events"] != 5557 {
		t.Errorf("KV events on %d: llm-d dials pods on 5557", ports["kv-events"])
	}
	if got := num(t, pool, "spec", "targetPorts", "0", "number"); got != ports["http"] {
		t.Errorf("InferencePool targets port %d, prefixd listens on %d", got, ports["http"])
	}
	if tp := str(t, svc, "spec", "ports", "0", "targetPort"); ports[tp] == 0 {
		t.Errorf("Service targets port %q, which the container does not name", tp)
	}
	if !strings.HasPrefix(o.kvEvents.podID, "$(POD_IP):") || port(t, strings.Replace(o.kvEvents.podID, "$(POD_IP)", "10.0.0.1", 1)) != ports["http"] {
		t.Errorf("--kv-events-pod-id %q: llm-d scores pods as <pod ip>:<serving port>", o.kvEvents.podID)
	}
	if str(t, c, "env", "0", "name") != "POD_IP" || str(t, c, "env", "0", "valueFrom", "fieldRef", "fieldPath") != "status.podIP" {
		t.Error("POD_IP is not the pod's IP from the downward API")
	}

	// Probes and drain.
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if got := str(t, c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path %s, want %s", probe, got, path)
		}
		if p := str(t, c, probe, "httpGet", "port"); ports[p] != ports["http"] {
			t.Errorf("%s on port %q, not http", probe, p)
		}
	}
	grace := time.Duration(num(t, dep, "spec", "template", "spec", "terminationGracePeriodSeconds")) * time.Second
	if grace <= o.drainTimeout {
		t.Errorf("terminationGracePeriodSeconds %v must exceed --drain-timeout %v", grace, o.drainTimeout)
	}

	// The endpoint picker: the pool names it, and its scorer indexes the
	// blocks prefixd publishes (same block size, same port).
	if name := str(t, pool, "spec", "endpointPickerRef", "name"); name != "prefixd-epp" {
		t.Errorf("InferencePool picks with %s", name)
	}
	if got, want := num(t, pool, "spec", "endpointPickerRef", "port", "number"), num(t, eppSvc, "spec", "ports", "0", "port"); got != want {
		t.Errorf("InferencePool dials the picker on %d, its Service serves %d", got, want)
	}
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(str(t, eppCfg, "data", "epp-config.yaml")), &cfg); err != nil {
		t.Fatal(err)
	}
	scorer := get(t, cfg, "plugins", "0")
	if str(t, scorer, "type") != "precise-prefix-cache-scorer" {
		t.Fatalf("first plugin %v", scorer)
	}
	if bs := num(t, scorer, "parameters", "indexerConfig", "tokenProcessorConfig", "blockSize"); bs != o.blockSize {
		t.Errorf("the scorer hashes blocks of %d tokens, prefixd caches blocks of %d", bs, o.blockSize)
	}
	if p := num(t, scorer, "parameters", "kvEventsConfig", "podDiscoveryConfig", "socketPort"); p != ports["kv-events"] {
		t.Errorf("the scorer dials pods on %d, prefixd publishes on %d", p, ports["kv-events"])
	}
	if f := str(t, scorer, "parameters", "kvEventsConfig", "topicFilter"); !strings.HasPrefix("kv@", f) {
		t.Errorf("topic filter %q misses prefixd's kv@<pod>@<model> topics", f)
	}
	checkKVEventsFenced(t, objs, labels, get(t, epp, "spec", "template", "metadata", "labels").(map[string]any), ports)
	eppArgs := strings.Join(func() (s []string) {
		for _, a := range get(t, epp, "spec", "template", "spec", "containers", "0", "args").([]any) {
			s = append(s, a.(string))
		}
		return s
	}(), " ")
	if !strings.Contains(eppArgs, "--pool-name="+str(t, pool, "metadata", "name")) {
		t.Errorf("the picker's args %q do not name the pool", eppArgs)
	}
}

// checkKVEventsFenced checks that a NetworkPolicy selects the prefixd pods
// (labels) for ingress and admits their KV event ports (kv-events,
// kv-replay in ports, the container's named ports) from the endpoint
// picker's pods (eppLabels) alone: the sockets have no authentication and
// their events carry every tenant's prompt tokens.
func checkKVEventsFenced(t *testing.T, objs map[string]map[string]any, labels, eppLabels map[string]any, ports map[string]int) {
	t.Helper()
	kvPorts := map[int]bool{ports["kv-events"]: true, ports["kv-replay"]: true}
	// portOf resolves a NetworkPolicy port, a number or a container
	// port's name.
	portOf := func(p any) int {
		switch v := get(t, p, "port").(type) {
		case float64:
			return int(v)
		case string:
			if ports[v] == 0 {
				t.Fatalf("NetworkPolicy port %q names no container port", v)
			}
			return ports[v]
		}
		t.Fatalf("NetworkPolicy port %v", p)
		return 0
	}
	admitted := map[int]bool{}
	fenced := false
	for key, obj := range objs {
		if !strings.HasPrefix(key, "NetworkPolicy/") {
			continue
		}
		sel, _ := get(t, obj, "spec", "podSelector", "matchLabels").(map[string]any)
		selects := len(sel) > 0
		for k, v := range sel {
			selects = selects && labels[k] == v
		}
		types := get(t, obj, "spec", "policyTypes").([]any)
		if !selects || !slices.Contains(types, any("Ingress")) {
			continue
		}
		fenced = true
		rules, _ := get(t, obj, "spec", "ingress").([]any)
		for i, rule := range rules {
			r := rule.(map[string]any)
			var reach []int // the KV ports this rule opens
			if rps, ok := r["ports"].([]any); ok {
				for _, p := range rps {
					if n := portOf(p); kvPorts[n] {
						reach = append(reach, n)
					}
				}
			} else {
				reach = []int{ports["kv-events"], ports["kv-replay"]} // no ports: every port
			}
			if len(reach) == 0 {
				continue
			}
			from, _ := r["from"].([]any)
			if len(from) == 0 {
				t.Errorf("%s rule %d opens KV event ports %v to every source", key, i, reach)
			}
			for _, peer := range from {
				p := peer.(map[string]any)
				ps, _ := p["podSelector"].(map[string]any)
				ml, _ := ps["matchLabels"].(map[string]any)
				if len(p) != 1 || len(ml) == 0 || len(ml) != len(ps) {
					t.Errorf("%s rule %d admits %v to KV event ports: want only the picker's pod selector", key, i, p)
					continue
				}
				for k, v := range ml {
					if eppLabels[k] != v {
						t.Errorf("%s rule %d admits pods %v to KV event ports, not the picker's (%v)", key, i, ml, eppLabels)
					}
				}
			}
			for _, n := range reach {
				admitted[n] = true
			}
		}
	}
	if !fenced {
		t.Fatal("no NetworkPolicy fences the prefixd pods' ingress: their KV event ports are open to the cluster")
	}
	for n := range kvPorts {
		if !admitted[n] {
			t.Errorf("no NetworkPolicy rule admits the picker to port %d", n)
		}
	}
}
