package main

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/remotetier"
)

// TestKubernetesRemoteTier checks the optional Valkey store against the
// code and the replicas: the ConfigMap's URL is one --remote-tier takes
// and names the store's Service and port; the replicas read it (and the
// password) only if present; the store evicts by expiry and keeps nothing
// on disk; only prefixd pods may dial it.
func TestKubernetesRemoteTier(t *testing.T) {
	objs := manifests(t)
	cm, dep, svc, pol := objs["ConfigMap/prefixd-remote-tier"], objs["Deployment/prefixd-kv-store"], objs["Service/prefixd-kv-store"],
		objs["NetworkPolicy/prefixd-kv-store"]
	if cm == nil || dep == nil || svc == nil || pol == nil {
		t.Fatal("valkey.yaml lacks its ConfigMap, Deployment, Service or NetworkPolicy")
	}
	raw := str(t, cm, "data", "url")
	var stderr bytes.Buffer
	o, err := parseServe(nil, map[string]string{"PREFIXD_REMOTE_TIER": raw, remotetier.PasswordEnv: "pw"}, &stderr)
	if err != nil || o.remoteTier.url != raw || len(o.unknownEnv) != 0 {
		t.Fatalf("PREFIXD_REMOTE_TIER=%s: %v (unknown %v)", raw, err, o.unknownEnv)
	}
	u, _ := url.Parse(raw)
	if u.Hostname() != str(t, svc, "metadata", "name") || port(t, u.Host) != num(t, svc, "spec", "ports", "0", "port") {
		t.Errorf("the URL %s does not name Service %s port %d", raw, str(t, svc, "metadata", "name"), num(t, svc, "spec", "ports", "0", "port"))
	}
	c := get(t, dep, "spec", "template", "spec", "containers", "0")
	if num(t, c, "ports", "0", "containerPort") != port(t, u.Host) {
		t.Errorf("the store listens on %d, the URL says %s", num(t, c, "ports", "0", "containerPort"), u.Host)
	}
	cmd := str(t, c, "args", "0")
	for _, want := range []string{"--maxmemory-policy volatile-lru", "--save ''", "--appendonly no", `"$PASSWORD"`} {
		if !strings.Contains(cmd, want) {
			t.Errorf("the store's command %q lacks %s", cmd, want)
		}
	}
	// The replicas take the URL and the password from the store's
	// ConfigMap and Secret, optionally: without valkey.yaml the tier is off.
	env := map[string]any{}
	for _, e := range get(t, objs["Deployment/prefixd"], "spec", "template", "spec", "containers", "0", "env").([]any) {
		env[str(t, e, "name")] = e
	}
	for name, ref := range map[string][2]string{
		"PREFIXD_REMOTE_TIER":  {"configMapKeyRef", "prefixd-remote-tier"},
		remotetier.PasswordEnv: {"secretKeyRef", str(t, get(t, c, "env", "0"), "valueFrom", "secretKeyRef", "name")},
	} {
		e := env[name]
		if e == nil || str(t, e, "valueFrom", ref[0], "name") != ref[1] || get(t, e, "valueFrom", ref[0], "optional") != true {
			t.Errorf("the replicas' %s is not an optional %s of %s", name, ref[0], ref[1])
		}
	}
	from := get(t, pol, "spec", "ingress", "0", "from", "0", "podSelector", "matchLabels", "app.kubernetes.io/name")
	if from != "prefixd" || str(t, pol, "spec", "ingress", "0", "ports", "0", "port") != "redis" ||
		len(get(t, pol, "spec", "ingress").([]any)) != 1 {
		t.Errorf("the store's NetworkPolicy admits %v, want only prefixd pods on redis", from)
	}
}
