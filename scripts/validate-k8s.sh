#!/usr/bin/env bash
# Validates the Kubernetes manifests under deploy/k8s (base, reembed/ and bootstrap/):
#   - every YAML file parses (duplicate keys are errors);
#   - every kustomization.yaml's resources exist, and every manifest is listed in one;
#   - every object against the Kubernetes OpenAPI schemas, strictly (unknown fields are errors),
#     with the PyPI package kubernetes-validate; the CRD kind ServiceMonitor against
#     deploy/k8s/schemas/servicemonitor.json with jsonschema; any other kind is an error;
#   - the output of `kubectl kustomize` / `kustomize build` of each kustomization, the same way
#     (skipped, and said so, when neither tool is installed);
#   - references between the objects: ConfigMaps, Secrets and their keys, Service selectors and
#     target ports, the ServiceMonitor's Services and port, the HPA's and the PDB's targets, the
#     writer's replicas (1), the shard Job's completions/parallelism against --shard I/N;
#   - the ConfigMap's ctxd.toml parses as TOML and its [index] db equals index-db; with a ctxd
#     binary (CTXD_BIN, else ctxd on PATH, else the build in ${CARGO_TARGET_DIR:-~/.cache/ctxd-target})
#     also `ctxd config validate` on it, alone and with the environment the pods load it with
#     (the Dockerfile's ENV and the containers' env: CTXD_* variables are config overrides).
# Exits non-zero on any problem, naming the file and what. Last line:
#   k8s: N manifests valid (kubernetes X.Y schemas)
#
# Environment: CTXD_K8S_VENV (venv for kubernetes-validate; default
# ${XDG_CACHE_HOME:-~/.cache}/ctxd/k8s-venv, created only when missing), CTXD_K8S_VERSION
# (schemas to validate against, default 1.33.0: backoffLimitPerIndex is GA from 1.33), CTXD_BIN
# (a ctxd binary, or "skip").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

K8S_DIR=deploy/k8s
KV_VERSION=1.37.0
k8s_version="${CTXD_K8S_VERSION:-1.33.0}"
venv="${CTXD_K8S_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd/k8s-venv}"

if ! "$venv/bin/python" -c "
import sys, jsonschema, yaml, kubernetes_validate.version as v
sys.exit(v.__version__ != '$KV_VERSION')" 2>/dev/null; then
    echo "validate-k8s: installing kubernetes-validate==$KV_VERSION into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Render each kustomization as kubectl apply -k would (no cluster needed).
render=""
if command -v kubectl >/dev/null 2>&1; then
    render="kubectl kustomize"
elif command -v kustomize >/dev/null 2>&1; then
    render="kustomize build"
fi
rendered=()
while IFS= read -r k; do
    d="$(dirname "$k")"
    if [[ -n "$render" ]]; then
        out="$work/rendered-$(echo "$d" | tr '/' '_').yaml"
        # A failed build is reported with the other problems (its message in place of the output).
        if $render "$d" >"$out" 2>"$out.err"; then
            rendered+=("$d=$out")
        else
            rendered+=("$d=!$out.err")
        fi
    fi
done < <(find "$K8S_DIR" -name kustomization.yaml | sort)

"$venv/bin/python" - "$K8S_DIR" "$k8s_version" "$work" "${rendered[@]}" <<'PY'
import os
import re
import sys
import tomllib

import jsonschema
import yaml
import kubernetes_validate.utils as kv

k8s_dir, k8s_version, work, *rendered = sys.argv[1:]
errors = []


def fail(where, what):
    errors.append(f"{where}: {what}")


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (PyYAML keeps the last one silently)."""


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load(path):
    try:
        with open(path) as f:
            return [d for d in yaml.load_all(f, Loader=StrictLoader) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        fail(path, f"YAML: {e}")
        return None


with open(os.path.join(k8s_dir, "schemas", "servicemonitor.json")) as f:
    import json
    sm_schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(sm_schema)
sm_validator = jsonschema.Draft202012Validator(sm_schema)
KUSTOMIZE_KINDS = {"Kustomization", "Component"}


def name_of(doc):
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"


def validate_doc(where, doc):
    """Schema validation of one object; returns the schema version used, or None."""
    if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
        fail(where, "not a Kubernetes object (apiVersion and kind required)")
        return None
    where = f"{where}: {name_of(doc)}"
    if doc["kind"] == "ServiceMonitor":
        errs = sorted(sm_validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errs:
            fail(where, f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message} (schemas/servicemonitor.json)")
        return None
    try:
        return kv.validate(doc, k8s_version, strict=True)
    except kv.ValidationError as e:
        fail(where, f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message} (kubernetes {e.version} schema)")
    except kv.SchemaNotFoundError as e:
        fail(where, f"no schema: {e.message}")
    except kv.VersionNotSupportedError as e:
        fail(where, e.message)
    return None


# 1. Parse every YAML file; kustomizations apart.
files = sorted(
    os.path.join(root, n)
    for root, _, names in os.walk(k8s_dir)
    for n in names
    if n.endswith((".yaml", ".yml"))
)
docs_by_file = {}
kustomizations = {}
for path in files:
    docs = load(path)
    if docs is None:
        continue
    if os.path.basename(path) in ("kustomization.yaml", "kustomization.yml"):
        if len(docs) != 1 or not isinstance(docs[0], dict):
            fail(path, "a kustomization is one YAML document")
            continue
        kustomizations[path] = docs[0]
    else:
        docs_by_file[path] = docs

# 2. Kustomizations: resources exist; every manifest listed once.
listed = {}
for kpath, k in kustomizations.items():
    kdir = os.path.dirname(kpath)
    if k.get("kind") not in KUSTOMIZE_KINDS:
        fail(kpath, f"kind {k.get('kind')!r} is not Kustomization")
    unknown = set(k) - {"apiVersion", "kind", "namespace", "resources", "components", "images", "labels",
                        "patches", "configMapGenerator", "secretGenerator", "generatorOptions"}
    if unknown:
        fail(kpath, f"keys this script does not check: {sorted(unknown)}")
    for key in ("resources", "components"):
        for r in k.get(key) or []:
            target = os.path.normpath(os.path.join(kdir, r))
            if "://" in r:
                fail(kpath, f"{key}: remote {r} (keep deploy/k8s self-contained)")
            elif os.path.isdir(target):
                if not any(os.path.exists(os.path.join(target, n)) for n in ("kustomization.yaml", "kustomization.yml")):
                    fail(kpath, f"{key}: {r} is a folder without kustomization.yaml")
            elif not os.path.isfile(target):
                fail(kpath, f"{key}: {r} does not exist")
            else:
                if target in listed:
                    fail(kpath, f"{key}: {r} is also listed in {listed[target]}")
                listed[target] = kpath
    for p in k.get("patches") or []:
        if "path" in p and not os.path.isfile(os.path.join(kdir, p["path"])):
            fail(kpath, f"patches: {p['path']} does not exist")
for path in docs_by_file:
    if os.path.normpath(path) not in listed:
        fail(path, "not listed in any kustomization.yaml's resources (never applied)")

# 3. Every object of every file against the schemas.
count = 0
versions = set()
objects = []  # (file, doc, kustomization dir)
for path, docs in docs_by_file.items():
    if not docs:
        fail(path, "no object in the file")
    for doc in docs:
        v = validate_doc(path, doc)
        if v:
            versions.add(v)
        count += 1
        objects.append((path, doc, os.path.dirname(listed.get(os.path.normpath(path), path))))

# 4. The rendered kustomizations (what kubectl apply -k sends), same validation.
for item in rendered:
    kdir, out = item.split("=", 1)
    if out.startswith("!"):
        with open(out[1:]) as f:
            fail(kdir, "kustomize build failed: " + " ".join(f.read().split()))
        continue
    docs = load(out)
    for doc in docs or []:
        validate_doc(f"{kdir} (kustomize build)", doc)
        ns = (doc.get("metadata") or {}).get("namespace")
        if doc.get("kind") != "Namespace" and not ns:
            fail(f"{kdir} (kustomize build): {name_of(doc)}", "no namespace after kustomize")

# 5. References between the objects (base and reembed share one namespace).
by_kind = {}
for path, doc, _ in objects:
    if isinstance(doc, dict):
        by_kind.setdefault(doc.get("kind"), {})[doc.get("metadata", {}).get("name")] = (path, doc)
configmaps = by_kind.get("ConfigMap", {})
secrets = by_kind.get("Secret", {})


def data_keys(doc):
    return set((doc.get("data") or {})) | set((doc.get("stringData") or {}))


def check_ref(where, kind, name, key=None, optional=False):
    table = configmaps if kind == "ConfigMap" else secrets
    if name not in table:
        if not optional:
            fail(where, f"{kind} {name!r} is not defined in {k8s_dir}")
        return
    if key is not None and key not in data_keys(table[name][1]) and not optional:
        fail(where, f"{kind} {name!r} has no key {key!r}")


workloads = []  # (path, doc, pod template)
for kind in ("StatefulSet", "Deployment", "Job"):
    for name, (path, doc) in by_kind.get(kind, {}).items():
        workloads.append((path, doc, ((doc.get("spec") or {}).get("template") or {})))
for path, doc, tpl in workloads:
    where = f"{path}: {name_of(doc)}"
    pod = tpl.get("spec") or {}
    sa = pod.get("serviceAccountName")
    if sa and sa not in by_kind.get("ServiceAccount", {}):
        fail(where, f"ServiceAccount {sa!r} is not defined")
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    claim_names = {c["metadata"]["name"] for c in (doc.get("spec") or {}).get("volumeClaimTemplates") or []}
    for v in volumes.values():
        if "configMap" in v:
            cm = v["configMap"]
            check_ref(where, "ConfigMap", cm.get("name"), optional=cm.get("optional", False))
            for it in cm.get("items") or []:
                check_ref(where, "ConfigMap", cm.get("name"), it.get("key"), cm.get("optional", False))
        if "secret" in v:
            s = v["secret"]
            check_ref(where, "Secret", s.get("secretName"), optional=s.get("optional", False))
            for it in s.get("items") or []:
                check_ref(where, "Secret", s.get("secretName"), it.get("key"), s.get("optional", False))
    for c in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        cwhere = f"{where}: container {c.get('name')}"
        for m in c.get("volumeMounts") or []:
            if m.get("name") not in volumes and m.get("name") not in claim_names:
                fail(cwhere, f"volumeMount {m.get('name')!r} has no volume")
        for e in c.get("envFrom") or []:
            for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                if key in e:
                    check_ref(cwhere, kind, e[key].get("name"), optional=e[key].get("optional", False))
        env_names = {"JOB_COMPLETION_INDEX"} if (doc.get("spec") or {}).get("completionMode") == "Indexed" else set()
        for e in c.get("env") or []:
            env_names.add(e.get("name"))
            vf = e.get("valueFrom") or {}
            for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                if key in vf:
                    check_ref(cwhere, kind, vf[key].get("name"), vf[key].get("key"), vf[key].get("optional", False))
        for arg in (c.get("command") or []) + (c.get("args") or []):
            for var in re.findall(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", str(arg)):
                if var not in env_names:
                    fail(cwhere, f"$({var}) in the arguments is not an environment variable of the container")
        ports = {p.get("name") for p in c.get("ports") or []}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
            if isinstance(port, str) and port not in ports:
                fail(cwhere, f"{probe} port {port!r} is not a container port")
        if not (c.get("resources") or {}).get("limits"):
            fail(cwhere, "no resource limits")
        sc = c.get("securityContext") or {}
        if not sc.get("readOnlyRootFilesystem") or sc.get("allowPrivilegeEscalation") is not False:
            fail(cwhere, "readOnlyRootFilesystem: true and allowPrivilegeEscalation: false expected")
    if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
        fail(where, "runAsNonRoot: true expected")


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pods_selected(selector):
    return [(p, d, t) for p, d, t in workloads if selects(selector, (t.get("metadata") or {}).get("labels") or {})]


services = by_kind.get("Service", {})
for name, (path, svc) in services.items():
    where = f"{path}: Service/{name}"
    targets = pods_selected((svc.get("spec") or {}).get("selector") or {})
    if not targets:
        fail(where, "its selector matches no pod template")
    for p in (svc.get("spec") or {}).get("ports") or []:
        tp = p.get("targetPort")
        for _, d, t in targets:
            names = {cp.get("name") for c in (t.get("spec") or {}).get("containers") or [] for cp in c.get("ports") or []}
            if isinstance(tp, str) and tp not in names:
                fail(where, f"targetPort {tp!r} is not a port of {name_of(d)}")
for name, (path, sts) in by_kind.get("StatefulSet", {}).items():
    spec = sts.get("spec") or {}
    svc = services.get(spec.get("serviceName"))
    if not svc or (svc[1].get("spec") or {}).get("clusterIP") != "None":
        fail(f"{path}: StatefulSet/{name}", f"serviceName {spec.get('serviceName')!r} is not a headless Service")
    if (sts.get("metadata") or {}).get("labels", {}).get("app.kubernetes.io/component") == "writer" and spec.get("replicas") != 1:
        fail(f"{path}: StatefulSet/{name}", "the writer holds the index lease: replicas must be 1")
for name, (path, sm) in by_kind.get("ServiceMonitor", {}).items():
    sel = ((sm.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    matched = [s for s in services.values() if selects(sel, (s[1].get("metadata") or {}).get("labels") or {})]
    if not matched:
        fail(f"{path}: ServiceMonitor/{name}", "its selector matches no Service")
    for ep in (sm.get("spec") or {}).get("endpoints") or []:
        for sp, s in matched:
            if ep.get("port") not in {p.get("name") for p in (s.get("spec") or {}).get("ports") or []}:
                fail(f"{path}: ServiceMonitor/{name}", f"Service/{s['metadata']['name']} has no port {ep.get('port')!r}")
        cred = (ep.get("authorization") or {}).get("credentials")
        if cred:
            check_ref(f"{path}: ServiceMonitor/{name}", "Secret", cred.get("name"), cred.get("key"))
for name, (path, hpa) in by_kind.get("HorizontalPodAutoscaler", {}).items():
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    if ref.get("name") not in by_kind.get(ref.get("kind"), {}):
        fail(f"{path}: HorizontalPodAutoscaler/{name}", f"scaleTargetRef {ref.get('kind')}/{ref.get('name')} is not defined")
for name, (path, pdb) in by_kind.get("PodDisruptionBudget", {}).items():
    if not pods_selected(((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}):
        fail(f"{path}: PodDisruptionBudget/{name}", "its selector matches no pod template")
for name, (path, job) in by_kind.get("Job", {}).items():
    spec = job.get("spec") or {}
    args = [a for c in ((spec.get("template") or {}).get("spec") or {}).get("containers") or [] for a in c.get("args") or []]
    if "--shard" in args:
        shard = args[args.index("--shard") + 1] if args.index("--shard") + 1 < len(args) else ""
        m = re.fullmatch(r"\$\(JOB_COMPLETION_INDEX\)/(\d+)", shard)
        if spec.get("completionMode") != "Indexed" or not m:
            fail(f"{path}: Job/{name}", "--shard needs completionMode Indexed and $(JOB_COMPLETION_INDEX)/N")
        elif not (int(m.group(1)) == spec.get("completions") == spec.get("parallelism")):
            fail(f"{path}: Job/{name}", f"--shard {shard}: N must equal completions ({spec.get('completions')}) "
                 f"and parallelism ({spec.get('parallelism')})")
    if "--commit" in args and spec.get("suspend") is not True:
        fail(f"{path}: Job/{name}", "the commit Job must be created suspended (it runs after the shard Job)")

# 6. ctxd.toml: TOML, and its [index] db equal to index-db; written out for `ctxd config validate`.
cm = configmaps.get("ctxd-config")
if not cm:
    fail(k8s_dir, "ConfigMap ctxd-config is not defined")
else:
    path, doc = cm
    text = (doc.get("data") or {}).get("ctxd.toml", "")
    try:
        cfg = tomllib.loads(text)
        db = (cfg.get("index") or {}).get("db")
        if db != (doc.get("data") or {}).get("index-db"):
            fail(f"{path}: ConfigMap/ctxd-config", f"index-db {doc['data'].get('index-db')!r} differs from ctxd.toml's [index] db {db!r}")
    except tomllib.TOMLDecodeError as e:
        fail(f"{path}: ConfigMap/ctxd-config: ctxd.toml", f"TOML: {e}")
    with open(os.path.join(work, "ctxd.toml"), "w") as f:
        f.write(text)

# The environment the config is loaded with in the pods: the image's ENV (the Dockerfile's last
# stage) and the literal env of the writer's and readers' containers (CTXD_* are overrides).
image_env = {}
try:
    with open("Dockerfile") as f:
        stages = re.split(r"(?im)^FROM\s", f.read())
    for line in re.findall(r"(?im)^ENV\s+(.+)$", stages[-1]):
        for kv_pair in line.split():
            if "=" in kv_pair:
                k, v = kv_pair.split("=", 1)
                image_env[k] = v
except OSError as e:
    fail("Dockerfile", str(e))
for kind in ("StatefulSet", "Deployment"):
    for name, (path, doc) in by_kind.get(kind, {}).items():
        for c in ((doc.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
            for e in c.get("env") or []:
                if "value" in e:
                    image_env[e["name"]] = str(e["value"])
with open(os.path.join(work, "pod.env"), "w") as f:
    f.writelines(f"{k}={v}\n" for k, v in sorted(image_env.items()))

for e in errors:
    print(f"FAIL {e}", file=sys.stderr)
if errors:
    print(f"k8s: {len(errors)} problem(s) in {k8s_dir}", file=sys.stderr)
    sys.exit(1)
with open(os.path.join(work, "summary"), "w") as f:
    f.write(f"{count} {','.join(sorted(versions))} {len(rendered)}\n")
PY

read -r count versions builds <"$work/summary"

# `ctxd config validate` on the ConfigMap's ctxd.toml, when a binary is at hand. A clean
# environment: the shell's own CTXD_* variables would otherwise be applied as overrides.
bin="${CTXD_BIN:-}"
if [[ -z "$bin" ]]; then
    target="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd-target}"
    for b in "$(command -v ctxd || true)" "$target/release/ctxd" "$target/debug/ctxd"; do
        if [[ -n "$b" && -x "$b" ]]; then bin="$b"; break; fi
    done
fi
if [[ "$bin" == skip ]]; then
    echo "ctxd.toml: TOML ok; ctxd config validate skipped (CTXD_BIN=skip)"
elif [[ -n "$bin" ]]; then
    if ! env -i PATH="$PATH" HOME="$HOME" "$bin" config validate "$work/ctxd.toml" >"$work/cfg.out" 2>&1; then
        echo "FAIL $K8S_DIR/configmap.yaml: ctxd.toml: $bin config validate:" >&2
        cat "$work/cfg.out" >&2
        exit 1
    fi
    # Again as the pods load it: the image's ENV and the containers' env apply as overrides.
    mapfile -t pod_env <"$work/pod.env"
    if ! env -i PATH="$PATH" HOME="$HOME" "${pod_env[@]}" "$bin" config validate "$work/ctxd.toml" >"$work/cfg.out" 2>&1; then
        echo "FAIL $K8S_DIR/configmap.yaml: ctxd.toml with the pods' environment (${pod_env[*]}): $bin config validate:" >&2
        cat "$work/cfg.out" >&2
        exit 1
    fi
    echo "ctxd.toml: valid, alone and with the pods' environment (${pod_env[*]}) ($bin config validate)"
else
    echo "ctxd.toml: TOML ok; ctxd config validate skipped (no ctxd binary; set CTXD_BIN)"
fi
if [[ -n "$render" ]]; then
    echo "kustomize: $builds kustomizations built and validated ($render)"
else
    echo "kustomize: build skipped (neither kubectl nor kustomize installed)"
fi
echo "k8s: $count manifests valid (kubernetes ${versions} schemas)"
