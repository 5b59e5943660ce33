package deploy_test

// The k8s and compose examples can be applied as written: they are read
// with the real parsers (the Kubernetes API types, strictly; compose-go's
// loader, which validates against the compose schema), every flag and
// LEDGER_* variable they give `ledger serve` is one its --help lists, the
// files they mount exist in the repository and, mounted as the manifest
// says into a scratch directory standing for the container, are what the
// ledger and nats-server read (the auth file loads, its seed resolves, the
// NATS configuration's include resolves), the durable consumers the
// manifests name are allowed by the auth example, and the ports agree.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/conf"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/mewledger/ledger/internal/auth/authcfg"
)

// serveHelp is what `ledger <command> --help` lists: its flags and their
// environment variables.
type serveHelp struct {
	flags, envs map[string]bool
}

var (
	ledgerBinOnce sync.Once
	ledgerBin     string
	ledgerBinErr  error
	helpMu        sync.Mutex
	helps         = map[string]serveHelp{}
)

var (
	helpFlag = regexp.MustCompile(`^  (?:-[A-Za-z], )?--([a-z0-9-]+)`)
	helpEnv  = regexp.MustCompile(`\benv (LEDGER_[A-Z0-9_]+)`)
)

// ledgerServeHelp reads `ledger serve --help` (see ledgerHelp).
func ledgerServeHelp(t *testing.T) serveHelp {
	t.Helper()
	h := ledgerHelp(t, "serve")
	if len(h.flags) < 10 || !h.envs["LEDGER_DATA"] {
		t.Fatalf("ledger serve --help lists %d flags, env %v: the help format changed?", len(h.flags), h.envs)
	}
	return h
}

// ledgerHelp builds cmd/ledger once (removed when the package's tests
// end: TestMain) and reads `ledger <command> --help`.
func ledgerHelp(t *testing.T, command string) serveHelp {
	t.Helper()
	ledgerBinOnce.Do(func() {
		bin := filepath.Join(os.TempDir(), fmt.Sprintf("ledger-deploy-test-%d", os.Getpid()))
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/ledger").CombinedOutput(); err != nil {
			ledgerBinErr = fmt.Errorf("go build ../cmd/ledger: %v\n%s", err, out)
			return
		}
		ledgerBin = bin
	})
	if ledgerBinErr != nil {
		t.Fatal(ledgerBinErr)
	}
	helpMu.Lock()
	defer helpMu.Unlock()
	if h, ok := helps[command]; ok {
		return h
	}
	out, err := exec.Command(ledgerBin, command, "--help").Output()
	if err != nil {
		t.Fatalf("ledger %s --help: %v", command, err)
	}
	h := serveHelp{flags: map[string]bool{}, envs: map[string]bool{}}
	for _, l := range strings.Split(string(out), "\n") {
		if m := helpFlag.FindStringSubmatch(l); m != nil {
			h.flags[m[1]] = true
		}
		for _, m := range helpEnv.FindAllStringSubmatch(l, -1) {
			h.envs[m[1]] = true
		}
	}
	if len(h.flags) == 0 {
		t.Fatalf("ledger %s --help lists no flag: the help format changed?", command)
	}
	helps[command] = h
	return h
}

// runtimeEnv are the variables a manifest may set that are not flags: the
// Go runtime's own, and the pod name the k8s manifest derives a flag from.
var runtimeEnv = map[string]bool{"GOMEMLIMIT": true, "GOGC": true, "POD_NAME": true}

// checkServeArgs checks args (after "serve") are flags `ledger serve`
// has, and returns them as name -> value.
func checkServeArgs(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	h := ledgerServeHelp(t)
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("%s: runs %q, want ledger serve", where, args)
	}
	out := map[string]string{}
	for _, a := range args[1:] {
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("%s: argument %q: want --flag=value", where, a)
			continue
		}
		if !h.flags[name] {
			t.Errorf("%s: ledger serve has no flag --%s", where, name)
		}
		out[name] = val
	}
	return out
}

// checkServeEnv checks every variable is one `ledger serve` reads (or the
// runtime's).
func checkServeEnv(t *testing.T, where string, names []string) {
	t.Helper()
	h := ledgerServeHelp(t)
	for _, n := range names {
		if !h.envs[n] && !runtimeEnv[n] {
			t.Errorf("%s: %s is not a variable of ledger serve (ledger serve --help lists them)", where, n)
		}
	}
}

// copyInto copies the file or directory src to dst (the scratch
// container's view of a mount).
func copyInto(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatalf("mount %s: %v", src, err)
	}
}

// hostPort returns the port of an ADDR (host:port).
func hostPort(t *testing.T, addr string) int {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	p, err := strconv.Atoi(addr[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return p
}

// authDurables loads the auth file as mounted and returns its durables.
func authDurables(t *testing.T, where, path string) []string {
	t.Helper()
	c, err := authcfg.Load(path)
	if err != nil {
		t.Fatalf("%s: the mounted auth file does not load as ledger serve --auth would: %v", where, err)
	}
	if _, err := c.ServiceConnectOptions(); err != nil {
		t.Fatalf("%s: the mounted auth file's service credentials: %v", where, err)
	}
	return c.NATS.Service.Durables
}

// k8sDocs splits a multi-document YAML file.
func k8sDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		// A document of comments only is no object.
		body := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")
		if strings.TrimSpace(body) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// TestKubernetesApplies decodes k8s/ledger.yaml strictly into the API's
// types and checks what the pods need to start as written.
func TestKubernetesApplies(t *testing.T) {
	const manifest = "k8s/ledger.yaml"
	var (
		sts      *appsv1.StatefulSet
		services []*corev1.Service
		kinds    []string
	)
	for i, d := range k8sDocs(t, manifest) {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatalf("%s: document %d: %v", manifest, i+1, err)
		}
		var obj any
		switch meta.Kind {
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Service":
			s := &corev1.Service{}
			services, obj = append(services, s), s
		case "StatefulSet":
			sts = &appsv1.StatefulSet{}
			obj = sts
		case "PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			t.Fatalf("%s: document %d: kind %q has no decoder here", manifest, i+1, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(d, obj); err != nil {
			t.Errorf("%s: %s (document %d) is not a valid %s: %v", manifest, meta.Kind, i+1, meta.Kind, err)
		}
		kinds = append(kinds, meta.Kind)
	}
	if sts == nil || len(services) == 0 {
		t.Fatalf("%s: kinds %v, want a StatefulSet and its Services", manifest, kinds)
	}
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if len(ctr.Command) != 0 {
		t.Errorf("the container overrides the image's entrypoint: %q", ctr.Command)
	}
	checkServeArgs(t, manifest, ctr.Args)

	env := map[string]string{}
	var names []string
	for _, e := range ctr.Env {
		// A $(VAR) reference must name a variable defined before it.
		for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(e.Value, -1) {
			if _, ok := env[m[1]]; !ok {
				t.Errorf("%s: %s refers to $(%s), not defined before it", manifest, e.Name, m[1])
			}
		}
		env[e.Name] = e.Value
		names = append(names, e.Name)
	}
	checkServeEnv(t, manifest, names)

	// Ports: the API listens where the container port, the probes and the
	// Services point.
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got := hostPort(t, env["LEDGER_HTTP"]); int32(got) != ports["http"] {
		t.Errorf("LEDGER_HTTP %q, container port http %d", env["LEDGER_HTTP"], ports["http"])
	}
	for _, pr := range []*corev1.Probe{ctr.ReadinessProbe, ctr.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.StrVal != "http" && pr.HTTPGet.Port.IntVal != ports["http"] {
			t.Errorf("a probe does not point at the http port: %+v", pr)
		}
	}
	for _, s := range services {
		for _, p := range s.Spec.Ports {
			if _, ok := ports[p.TargetPort.StrVal]; !ok && p.TargetPort.IntVal != ports["http"] {
				t.Errorf("service %s: target port %v is not a container port", s.Name, p.TargetPort.String())
			}
		}
		if s.Spec.Selector["app.kubernetes.io/name"] != sts.Spec.Template.Labels["app.kubernetes.io/name"] {
			t.Errorf("service %s selects %v, the pods are %v", s.Name, s.Spec.Selector, sts.Spec.Template.Labels)
		}
	}
	if sts.Spec.ServiceName == "" || !slices.ContainsFunc(services, func(s *corev1.Service) bool {
		return s.Name == sts.Spec.ServiceName && s.Spec.ClusterIP == corev1.ClusterIPNone
	}) {
		t.Errorf("serviceName %q is not a headless Service of the manifest", sts.Spec.ServiceName)
	}

	// The NATS URLs: one per node of nats-values.yaml, on the chart's
	// headless service, port 4222.
	var values struct {
		Config struct {
			Cluster struct {
				Replicas int `json:"replicas"`
			} `json:"cluster"`
		} `json:"config"`
	}
	vb, err := os.ReadFile("k8s/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	urls := strings.Split(env["LEDGER_NATS_URL"], ",")
	for i, u := range urls {
		if want := fmt.Sprintf("nats://nats-%d.nats-headless:4222", i); u != want {
			t.Errorf("LEDGER_NATS_URL member %d is %q, want %q", i, u, want)
		}
	}
	if len(urls) != values.Config.Cluster.Replicas {
		t.Errorf("%d NATS URLs for a cluster of %d nodes", len(urls), values.Config.Cluster.Replicas)
	}

	// The auth secret, mounted as the manifest says, from the files the
	// manifest's kubectl command puts in it.
	mounts := map[string]string{} // volume name -> mount path
	for _, m := range ctr.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	root := t.TempDir()
	secretFiles := kubectlSecretFiles(t, manifest)
	mountedSecret := false
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		mountedSecret = true
		at, ok := mounts[v.Name]
		if !ok {
			t.Errorf("secret volume %s is not mounted", v.Name)
			continue
		}
		// The pod runs as a non-root user whose group is the fsGroup: the
		// mode must let that group read, rather than rely on the kubelet
		// widening it.
		if m := v.Secret.DefaultMode; m != nil && *m&0o040 == 0 {
			t.Errorf("secret volume %s: mode %#o: the pod's group cannot read it", v.Name, *m)
		}
		items := v.Secret.Items
		if len(items) == 0 { // every key, at its own name
			for key := range secretFiles {
				items = append(items, corev1.KeyToPath{Key: key, Path: key})
			}
		}
		for _, it := range items {
			src, ok := secretFiles[it.Key]
			if !ok {
				t.Errorf("secret %s: item key %q is not created by the manifest's kubectl command (%v)", v.Secret.SecretName, it.Key, secretFiles)
				continue
			}
			copyInto(t, filepath.Join("..", src), filepath.Join(root, at, it.Path))
		}
	}
	if !mountedSecret {
		t.Fatal("no secret volume")
	}
	durables := authDurables(t, manifest, filepath.Join(root, env["LEDGER_AUTH"]))
	for i := range *sts.Spec.Replicas {
		d := strings.ReplaceAll(env["LEDGER_DURABLE"], "$(POD_NAME)", fmt.Sprintf("%s-%d", sts.Name, i))
		if !slices.Contains(durables, d) {
			t.Errorf("pod %d's durable %q is not in the auth file's nats.service.durables %v", i, d, durables)
		}
	}
	if dm := mounts["data"]; dm == "" || dm != env["LEDGER_DATA"] {
		t.Errorf("LEDGER_DATA %q, data volume mounted at %q", env["LEDGER_DATA"], dm)
	}
	if u := pod.SecurityContext.RunAsUser; u == nil || *u != 65532 {
		t.Errorf("runAsUser %v, want the image's nonroot user 65532", u)
	}
}

// kubectlSecretFiles reads the `kubectl create secret generic` command of
// the manifest's comment: key -> file (relative to the repository root),
// each of which must exist.
func kubectlSecretFiles(t *testing.T, manifest string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`--from-file=([^=\s]+)=(\S+)`).FindAllStringSubmatch(string(b), -1) {
		if _, err := os.Stat(filepath.Join("..", m[2])); err != nil {
			t.Errorf("%s: the secret's %s comes from %s, which is not in the repository: %v", manifest, m[1], m[2], err)
		}
		out[m[1]] = m[2]
	}
	if len(out) == 0 {
		t.Fatalf("%s: no kubectl create secret --from-file in its comment", manifest)
	}
	return out
}

// TestComposeApplies loads docker-compose.yml with compose-go (the
// schema, interpolation, merges) and checks what the containers need to
// start as written.
func TestComposeApplies(t *testing.T) {
	ctx := context.Background()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	details, err := loader.LoadConfigFiles(ctx, []string{"docker-compose.yml"}, wd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(ctx, *details, func(o *loader.Options) { o.SetProjectName("deploy", true) })
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	ledgerSvc, ok := p.Services["ledger"]
	if !ok {
		t.Fatalf("no ledger service: %v", p.ServiceNames())
	}
	if ledgerSvc.Build == nil {
		t.Fatal("the ledger service has no build")
	}
	if _, err := os.Stat(filepath.Join(ledgerSvc.Build.Context, ledgerSvc.Build.Dockerfile)); err != nil {
		t.Errorf("the ledger's Dockerfile: %v", err)
	}
	flags := checkServeArgs(t, "docker-compose.yml ledger", ledgerSvc.Command)
	var envNames []string
	for n := range ledgerSvc.Environment {
		envNames = append(envNames, n)
	}
	checkServeEnv(t, "docker-compose.yml ledger", envNames)

	// Every service's bind mounts exist here, and mounted into a scratch
	// root they are what the programs read.
	mount := func(svc types.ServiceConfig) string {
		root := t.TempDir()
		for _, v := range svc.Volumes {
			switch v.Type {
			case types.VolumeTypeBind:
				if !strings.HasPrefix(v.Source, wd) {
					t.Errorf("%s: bind mount %s is outside the repository's deploy/", svc.Name, v.Source)
				}
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%s: bind mount source: %v", svc.Name, err)
					continue
				}
				copyInto(t, v.Source, filepath.Join(root, v.Target))
			case types.VolumeTypeVolume:
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("%s: volume %s is not declared", svc.Name, v.Source)
				}
			}
		}
		return root
	}
	root := mount(ledgerSvc)
	durables := authDurables(t, "docker-compose.yml ledger", filepath.Join(root, flags["auth"]))
	if !slices.Contains(durables, flags["durable"]) {
		t.Errorf("the ledger's durable %q is not in the auth file's durables %v", flags["durable"], durables)
	}
	httpPort := hostPort(t, flags["http"])
	if !slices.ContainsFunc(ledgerSvc.Ports, func(pc types.ServicePortConfig) bool { return int(pc.Target) == httpPort }) {
		t.Errorf("the ledger listens on %d, which no published port targets: %+v", httpPort, ledgerSvc.Ports)
	}

	// The NATS nodes: the configuration file given to nats-server -c, as
	// mounted, parses with its include; the ledger's URLs name the nodes
	// on their client port; the healthcheck asks their monitoring port.
	var natsNames []string
	for _, u := range strings.Split(flags["nats-url"], ",") {
		host, port, _ := strings.Cut(strings.TrimPrefix(u, "nats://"), ":")
		svc, ok := p.Services[host]
		if !ok {
			t.Errorf("--nats-url names %s, not a service", host)
			continue
		}
		natsNames = append(natsNames, host)
		if !slices.Contains(ledgerSvc.GetDependencies(), host) {
			t.Errorf("the ledger does not depend on %s", host)
		}
		i := slices.Index(svc.Command, "-c")
		if i < 0 || i+1 >= len(svc.Command) {
			t.Errorf("%s: no -c FILE in %q", host, svc.Command)
			continue
		}
		root := mount(svc)
		for k, v := range svc.Environment {
			if v != nil {
				t.Setenv(k, *v)
			}
		}
		file := filepath.Join(root, svc.Command[i+1])
		if _, err := conf.ParseFileWithChecks(file); err != nil {
			t.Errorf("%s: its configuration as mounted: %v", host, err)
			continue
		}
		cfg, err := conf.ParseFile(file)
		if err != nil {
			t.Errorf("%s: its configuration as mounted: %v", host, err)
			continue
		}
		if got := fmt.Sprint(cfg["listen"]); hostPort(t, got) != atoi(t, port) {
			t.Errorf("%s listens on %s, the ledger connects to port %s", host, got, port)
		}
		if cfg["server_name"] != host {
			t.Errorf("%s: server_name %v", host, cfg["server_name"])
		}
		if hc := svc.HealthCheck; hc == nil || !strings.Contains(strings.Join(hc.Test, " "), fmt.Sprintf(":%d/", hostPort(t, fmt.Sprint(cfg["http"])))) {
			t.Errorf("%s: healthcheck %v does not ask the monitoring port %v", host, svc.HealthCheck, cfg["http"])
		}
	}
	if len(natsNames) != 3 {
		t.Errorf("the ledger connects to %v, want the three nodes", natsNames)
	}
}

// commentedVar is an assignment shown commented out: "# LEDGER_X=value".
var commentedVar = regexp.MustCompile(`^#\s*([A-Z][A-Z0-9_]*)=`)

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// The env files of the systemd units and the cluster example set only
// variables of the command they run (ledger serve, ledger monitor),
// including those shown commented out for the reader to enable; each
// unit runs the command its env file is for.
func TestEnvFilesApply(t *testing.T) {
	for _, f := range []struct{ env, unit, command string }{
		{"systemd/ledger.env", "systemd/ledger.service", "serve"},
		{"cluster/ledger.env", "", "serve"},
		{"monitor/ledger-monitor.env", "monitor/ledger-monitor.service", "monitor"},
	} {
		b, err := os.ReadFile(f.env)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range bytes.Split(b, []byte("\n")) {
			l = bytes.TrimSpace(l)
			if m := commentedVar.FindSubmatch(l); m != nil {
				names = append(names, string(m[1]))
				continue
			}
			if len(l) == 0 || l[0] == '#' {
				continue
			}
			name, _, ok := bytes.Cut(l, []byte("="))
			if !ok {
				t.Errorf("%s: line %q is not NAME=VALUE", f.env, l)
				continue
			}
			names = append(names, string(name))
		}
		if len(names) == 0 {
			t.Errorf("%s sets nothing", f.env)
		}
		if f.command == "serve" {
			checkServeEnv(t, f.env, names)
		} else {
			h := ledgerHelp(t, f.command)
			for _, n := range names {
				if !h.envs[n] && !runtimeEnv[n] {
					t.Errorf("%s: %s is not a variable of ledger %s (ledger %s --help lists them)", f.env, n, f.command, f.command)
				}
			}
		}
		if f.unit == "" {
			continue
		}
		u, err := os.ReadFile(f.unit)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/ledger ` + f.command + `\b`).Match(u) {
			t.Errorf("%s: ExecStart does not run ledger %s", f.unit, f.command)
		}
		if !bytes.Contains(u, []byte("EnvironmentFile=-/etc/ledger/"+filepath.Base(f.env))) {
			t.Errorf("%s: does not read /etc/ledger/%s", f.unit, filepath.Base(f.env))
		}
	}
}
