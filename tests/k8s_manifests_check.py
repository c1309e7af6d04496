#!/usr/bin/env python3
"""Checks deploy/k8s/ offline, with no API server (driven by tests/k8s_manifests_test.cc).

  --check=schemas    every core object (Service, StatefulSet, PVC, PDB, ConfigMap, Job) validates
                     strictly (no unknown fields) against Kubernetes' own JSON schemas
                     (kubernetes-validate, KUBERNETES_VERSION); the JobSet's Job templates and
                     the TFJob's pod templates validate the same way, as batch/v1 Jobs and v1
                     PodTemplates, and their CRD fields are checked against the field names and
                     values of the JobSet v1alpha2 and TFJob v1 APIs written out below (their
                     CRDs' schemas are not shipped here). Plus what schemas cannot see and the
                     API server would refuse or silently get wrong: selectors that match their
                     pods, podFailurePolicy only with restartPolicy Never and naming the
                     container, docs/exit-codes.md's codes in every podFailurePolicy, ports and
                     probes on the daemon's port, generate.py's output up to date.
  --check=tf_config  renders every pod of every form as Kubernetes would (hostname, env with the
                     downward API, namespace; TFJob's TF_CONFIG as the training operator writes
                     it), runs the entrypoint with SHARDPS_ENTRYPOINT_DRY_RUN=1, and checks that
                     the role's daemon accepts the TF_CONFIG and the container's args
                     (--validate_config), that it runs the right daemon with those args, and
                     that every address in TF_CONFIG names a pod of the manifests under its
                     Service (or JobSet subdomain) on the port the pod serves.

Prints one line per problem and, last, `RESULT {json}` with counts; exits 1 on any problem.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.29.0"
ROLES = ("chief", "ps", "worker", "evaluator")
NAMESPACE = "shardps-test"  # not "default": shows that the namespace comes from the pod
PLAIN_FILES = ("common.yaml", "cluster.yaml", "workers-gpu.yaml", "workers-cpu.yaml",
               "workers-python.yaml", "submit-job.yaml")
# docs/exit-codes.md's table: FailJob 2, 4, 6; Ignore 5 and disruptions.
EXIT_RULES = {"FailJob": [2, 4, 6], "Ignore": [5]}

# The CRD fields relied on, by the names of the APIs' Go types' json tags.
# JobSet v1alpha2 (sigs.k8s.io/jobset/api/jobset/v1alpha2, jobset_types.go).
JOBSET_SPEC = {"replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy",
               "suspend", "coordinator", "managedBy", "ttlSecondsAfterFinished"}
JOBSET_NETWORK = {"enableDNSHostnames", "subdomain", "publishNotReadyAddresses"}
JOBSET_SUCCESS = {"operator", "targetReplicatedJobs"}
JOBSET_SUCCESS_OPERATORS = {"All", "Any"}
JOBSET_FAILURE = {"maxRestarts", "restartStrategy", "rules"}
JOBSET_RULE = {"name", "action", "onJobFailureReasons", "onJobFailureMessagePatterns",
               "targetReplicatedJobs"}
JOBSET_ACTIONS = {"FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"}
JOB_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy",
                       "MaxFailedIndexesExceeded"}
JOBSET_REPLICATED_JOB = {"name", "replicas", "template", "dependsOn"}
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
# TFJob v1 (github.com/kubeflow/training-operator, pkg/apis/kubeflow.org/v1).
TFJOB_SPEC = {"runPolicy", "successPolicy", "tfReplicaSpecs", "enableDynamicWorker"}
TFJOB_RUN_POLICY = {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
                    "backoffLimit", "schedulingPolicy", "suspend", "managedBy"}
TFJOB_CLEAN_POD_POLICIES = {"All", "Running", "None"}
TFJOB_SUCCESS_POLICIES = {"", "AllWorkers"}
TFJOB_REPLICA_TYPES = {"Chief": "chief", "PS": "ps", "Worker": "worker",
                       "Evaluator": "evaluator"}
TFJOB_REPLICA_SPEC = {"replicas", "template", "restartPolicy"}
TFJOB_RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}
TFJOB_CONTAINER = "tensorflow"   # the training operator sets TF_CONFIG in this container
TFJOB_PORT_NAME = "tfjob-port"   # and takes the port from this one (default 2222)

problems = []


def problem(where, message):
    problems.append(f"{where}: {message}")
    print(f"PROBLEM {where}: {message}")


def load(k8s_dir, name):
    with open(os.path.join(k8s_dir, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def where_of(obj):
    return f"{obj['kind']}/{obj['metadata']['name']}"


def validate(obj, where):
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        return True
    except kubernetes_validate.ValidationError as e:
        path = "/".join(str(p) for p in e.path)
        problem(where, f"schema {KUBERNETES_VERSION}: {path}: {e.message}")
    except kubernetes_validate.SchemaNotFoundError as e:
        problem(where, f"no schema: {e}")
    return False


def unknown_keys(obj, allowed, where):
    for key in obj:
        if key not in allowed:
            problem(where, f"field {key!r} is not one of {sorted(allowed)}")


def check_pod_failure_policy(job_spec, pod_spec, where):
    policy = job_spec.get("podFailurePolicy")
    if policy is None:
        return {}, False
    if pod_spec.get("restartPolicy") != "Never":
        problem(where, "podFailurePolicy needs the pod's restartPolicy: Never")
    names = {c["name"] for c in pod_spec["containers"]}
    found = {}
    disruption = False
    for rule in policy["rules"]:
        codes = rule.get("onExitCodes")
        if codes:
            if codes.get("containerName") not in names:
                problem(where, f"podFailurePolicy names container {codes.get('containerName')!r},"
                        f" not one of {sorted(names)}")
            found.setdefault(rule["action"], []).extend(codes["values"])
        for cond in rule.get("onPodConditions", []):
            if cond.get("type") == "DisruptionTarget" and rule["action"] == "Ignore":
                disruption = True
            if "status" not in cond:  # JobSet's CRD requires it; a core Job defaults it
                problem(where, "onPodConditions[].status is missing")
    return found, disruption


def check_daemon_pod(pod_spec, role, where, container_name="shardps", port_name="grpc"):
    """Daemon containers: the entrypoint, the port, probes on that port (not on the evaluator)."""
    containers = [c for c in pod_spec["containers"] if c["name"] == container_name]
    if len(containers) != 1:
        problem(where, f"no container named {container_name!r}")
        return
    c = containers[0]
    if c.get("command") != ["/usr/local/bin/shardps-entrypoint"]:
        problem(where, f"command {c.get('command')} is not the entrypoint")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    # A user's script (workers-python.yaml): shardps.Evaluator answers health checks too.
    script = any(e.get("name") == "SHARDPS_PYTHON_SCRIPT" for e in c.get("env", []))
    for probe in ("readinessProbe", "livenessProbe"):
        if role == "evaluator" and not script:
            if probe in c:
                problem(where, f"the evaluator listens on no port, but has a {probe}")
        elif c.get(probe, {}).get("grpc", {}).get("port") != ports.get(port_name):
            problem(where, f"{probe} is not a gRPC probe on port {port_name}")
    if (role != "evaluator" or script) and port_name not in ports:
        problem(where, f"no container port named {port_name}")
    # deploy/image's two images under one name: the GPU one exactly where a GPU is asked for.
    wants_gpu = "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
    base = "shardps-python:latest" if script else "shardps:latest"
    expected = base + "-gpu" if wants_gpu else base
    if c.get("image") != expected:
        problem(where, f"image {c.get('image')!r}, expected {expected!r} "
                       f"({'a GPU' if wants_gpu else 'no GPU'} asked for)")


def check_schemas(k8s_dir, repo):
    counts = {"validated": 0, "crd_templates_validated": 0, "kinds": {}}
    objects = []
    for name in PLAIN_FILES:
        for obj in load(k8s_dir, name):
            objects.append(obj)
            counts["kinds"][obj["kind"]] = counts["kinds"].get(obj["kind"], 0) + 1
            if validate(obj, f"{name}: {where_of(obj)}"):
                counts["validated"] += 1
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    for obj in objects:
        where = where_of(obj)
        if obj["kind"] == "StatefulSet":
            spec = obj["spec"]
            pod_labels = spec["template"]["metadata"]["labels"]
            if any(pod_labels.get(k) != v for k, v in spec["selector"]["matchLabels"].items()):
                problem(where, "selector does not match the pod template's labels")
            svc = services.get(spec["serviceName"])
            if svc is None:
                problem(where, f"serviceName {spec['serviceName']!r} is no Service")
            else:
                if svc["spec"].get("clusterIP") != "None" or \
                        not svc["spec"].get("publishNotReadyAddresses"):
                    problem(where, f"Service {svc['metadata']['name']} is not headless with "
                            "publishNotReadyAddresses")
                if any(pod_labels.get(k) != v for k, v in svc["spec"]["selector"].items()):
                    problem(where, f"Service {svc['metadata']['name']} does not select its pods")
            role = pod_labels["app.kubernetes.io/component"]
            check_daemon_pod(spec["template"]["spec"], role, where)
        if obj["kind"] == "PodDisruptionBudget":
            ps = [o for o in objects if o["kind"] == "StatefulSet" and
                  o["metadata"]["name"] == "shardps-ps"][0]
            if obj["spec"]["selector"]["matchLabels"] != ps["spec"]["selector"]["matchLabels"]:
                problem(where, "does not select the ps")
        if obj["kind"] == "Job":
            found, disruption = check_pod_failure_policy(
                obj["spec"], obj["spec"]["template"]["spec"], where)
            if found.get("FailJob") != [2, 4] or not disruption:
                problem(where, f"shardctl's podFailurePolicy: {found}")
        if obj["kind"] == "ConfigMap":
            for key, text in obj["data"].items():
                job = json.loads(text)
                with open(os.path.join(repo, "deploy", "jobs", key)) as f:
                    original = json.load(f)
                if {k: v for k, v in job.items() if k != "checkpoint"} != \
                        {k: v for k, v in original.items() if k != "checkpoint"}:
                    problem(where, f"{key} differs from deploy/jobs/{key} beyond its checkpoint")
                if not job["checkpoint"]["dir"].startswith("/ckpt/"):
                    problem(where, f"{key}: checkpoint dir not on the volume")

    # JobSet: each replicated job's Job template as a batch/v1 Job.
    (js,) = load(k8s_dir, "jobset.yaml")
    where = where_of(js)
    if js["apiVersion"] != "jobset.x-k8s.io/v1alpha2":
        problem(where, f"apiVersion {js['apiVersion']}")
    spec = js["spec"]
    unknown_keys(spec, JOBSET_SPEC, where + " spec")
    unknown_keys(spec["network"], JOBSET_NETWORK, where + " spec.network")
    if spec["network"].get("enableDNSHostnames") is not True:
        problem(where, "network.enableDNSHostnames must be true: the entrypoint uses hostnames")
    unknown_keys(spec["successPolicy"], JOBSET_SUCCESS, where + " spec.successPolicy")
    if spec["successPolicy"] != {"operator": "All", "targetReplicatedJobs": ["chief"]}:
        problem(where, f"successPolicy {spec['successPolicy']}")
    unknown_keys(spec["failurePolicy"], JOBSET_FAILURE, where + " spec.failurePolicy")
    names = [r["name"] for r in spec["replicatedJobs"]]
    for rule in spec["failurePolicy"].get("rules", []):
        unknown_keys(rule, JOBSET_RULE, where + " failurePolicy.rules[]")
        if rule["action"] not in JOBSET_ACTIONS or not RULE_NAME.match(rule.get("name", "")):
            problem(where, f"failurePolicy rule {rule}")
        if not set(rule.get("onJobFailureReasons", [])) <= JOB_FAILURE_REASONS:
            problem(where, f"onJobFailureReasons {rule['onJobFailureReasons']}")
        if not set(rule.get("targetReplicatedJobs", [])) <= set(names):
            problem(where, f"targetReplicatedJobs {rule['targetReplicatedJobs']}")
    if sorted(names) != sorted(ROLES):
        problem(where, f"replicatedJobs {names}, not {list(ROLES)}")
    for rjob in spec["replicatedJobs"]:
        rwhere = f"{where} replicatedJobs[{rjob['name']}]"
        unknown_keys(rjob, JOBSET_REPLICATED_JOB, rwhere)
        if rjob["replicas"] != 1:
            problem(rwhere, "replicas must be 1 (the entrypoint's addresses use job index 0)")
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": f"{js['metadata']['name']}-{rjob['name']}-0"},
               **rjob["template"]}
        if validate(job, rwhere + " as batch/v1 Job"):
            counts["crd_templates_validated"] += 1
        jspec = rjob["template"]["spec"]
        if jspec.get("completionMode") != "Indexed" or \
                jspec["completions"] != jspec["parallelism"]:
            problem(rwhere, "not an Indexed Job running all its pods at once")
        pod = jspec["template"]["spec"]
        found, disruption = check_pod_failure_policy(jspec, pod, rwhere)
        if {k: sorted(v) for k, v in found.items()} != EXIT_RULES or not disruption:
            problem(rwhere, f"podFailurePolicy {found} is not docs/exit-codes.md's {EXIT_RULES}")
        check_daemon_pod(pod, rjob["name"], rwhere)
        for i in range(jspec["completions"]):
            if len(f"{js['metadata']['name']}-{rjob['name']}-0-{i}") > 63:
                problem(rwhere, "hostname longer than 63")

    # TFJob: each replica type's pod template as a v1 PodTemplate.
    (tj,) = load(k8s_dir, "tfjob.yaml")
    where = where_of(tj)
    if tj["apiVersion"] != "kubeflow.org/v1":
        problem(where, f"apiVersion {tj['apiVersion']}")
    spec = tj["spec"]
    unknown_keys(spec, TFJOB_SPEC, where + " spec")
    unknown_keys(spec["runPolicy"], TFJOB_RUN_POLICY, where + " runPolicy")
    if spec["runPolicy"].get("cleanPodPolicy") not in TFJOB_CLEAN_POD_POLICIES:
        problem(where, f"cleanPodPolicy {spec['runPolicy'].get('cleanPodPolicy')}")
    if spec.get("successPolicy", "") not in TFJOB_SUCCESS_POLICIES:
        problem(where, f"successPolicy {spec['successPolicy']!r}")
    if sorted(spec["tfReplicaSpecs"]) != sorted(TFJOB_REPLICA_TYPES):
        problem(where, f"replica types {sorted(spec['tfReplicaSpecs'])}")
    for rtype, rspec in spec["tfReplicaSpecs"].items():
        rwhere = f"{where} tfReplicaSpecs.{rtype}"
        unknown_keys(rspec, TFJOB_REPLICA_SPEC, rwhere)
        if rspec.get("restartPolicy") not in TFJOB_RESTART_POLICIES - {"ExitCode"}:
            problem(rwhere, f"restartPolicy {rspec.get('restartPolicy')} (ExitCode would not "
                    "restart an exit 5)")
        template = {"apiVersion": "v1", "kind": "PodTemplate",
                    "metadata": {"name": f"{tj['metadata']['name']}-{rtype.lower()}"},
                    "template": rspec["template"]}
        if validate(template, rwhere + " as v1 PodTemplate"):
            counts["crd_templates_validated"] += 1
        check_daemon_pod(rspec["template"]["spec"], TFJOB_REPLICA_TYPES.get(rtype, "?"), rwhere,
                         container_name=TFJOB_CONTAINER, port_name=TFJOB_PORT_NAME)

    gen = subprocess.run([sys.executable, os.path.join(k8s_dir, "generate.py"), "--check"],
                         capture_output=True, text=True)
    if gen.returncode != 0:
        problem("deploy/k8s/generate.py --check", gen.stderr.strip())
    return counts


# --- TF_CONFIG ---------------------------------------------------------------------------------
def render_env(container, pod_labels, extra):
    """The container's environment as the kubelet sets it (the downward API resolved)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update(extra)
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
            continue
        path = var["valueFrom"]["fieldRef"]["fieldPath"]
        m = re.match(r"^metadata\.labels\['([^']+)'\]$", path)
        if path == "metadata.namespace":
            env[var["name"]] = NAMESPACE
        elif m and m.group(1) in pod_labels:
            env[var["name"]] = pod_labels[m.group(1)]
        else:
            problem(container["name"], f"env {var['name']}: fieldPath {path} has no value here")
    return env


def run_pod(entrypoint, bins, container, env, where, expect_role, known_hosts, port):
    """Dry-runs the entrypoint, checks the daemon accepts the result; returns TF_CONFIG."""
    env = dict(env, SHARDPS_ENTRYPOINT_DRY_RUN="1")
    out = subprocess.run([entrypoint] + container.get("args", []), env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        problem(where, f"entrypoint exit {out.returncode}: {out.stderr.strip()}")
        return None
    lines = out.stdout.splitlines()
    tf_config = json.loads(lines[0][len("TF_CONFIG="):])
    # EXEC /usr/local/bin/<role> args..., each %q-quoted: the args here have no specials.
    exec_words = lines[1].split(" ")
    script = env.get("SHARDPS_PYTHON_SCRIPT")
    if script:  # the user's script (workers-python.yaml), run by the image's Python
        want = ["python3", script] + container.get("args", [])
        if exec_words[1:] != want:
            problem(where, f"runs {lines[1]!r}, not {' '.join(want)!r}")
    elif exec_words[1] != f"/usr/local/bin/{expect_role}" or \
            exec_words[2:] != container.get("args", []):
        problem(where, f"runs {lines[1]!r}, not the {expect_role} daemon with the args")
    if tf_config["task"]["type"] != expect_role:
        problem(where, f"task.type {tf_config['task']['type']}")
    for job, addresses in tf_config["cluster"].items():
        for i, address in enumerate(addresses):
            host, _, p = address.rpartition(":")
            if host not in known_hosts or known_hosts[host] != (job, i):
                problem(where, f"cluster.{job}[{i}] {address!r} is no pod of the manifests "
                        f"under its Service (known: {sorted(known_hosts)})")
            if int(p) != port:
                problem(where, f"cluster.{job}[{i}] port {p}, the pods serve {port}")
    # A script's TF_CONFIG is checked by the daemon of its role (the same parser the
    # extension uses), without the script's arguments.
    check = subprocess.run([bins[expect_role]] + ([] if script else container.get("args", [])) +
                           ["--validate_config"],
                           env={"TF_CONFIG": json.dumps(tf_config), "PATH": env["PATH"]},
                           capture_output=True, text=True)
    if check.returncode != 0 or "TF_CONFIG OK" not in check.stdout:
        problem(where, f"{expect_role} --validate_config exit {check.returncode}: "
                f"{check.stderr.strip()}")
    return tf_config


def check_tf_config(k8s_dir, entrypoint, bins):
    counts = {"pods": 0}
    # Long-lived cluster: StatefulSet pods shardps-<role>-<ordinal> under Service shardps-<role>.
    for workers_file in ("workers-gpu.yaml", "workers-cpu.yaml", "workers-python.yaml"):
        objects = load(k8s_dir, "cluster.yaml") + load(k8s_dir, workers_file)
        services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
        # Applied after cluster.yaml, a StatefulSet of the same name replaces its own.
        sets = list({o["metadata"]["name"]: o for o in objects
                     if o["kind"] == "StatefulSet"}.values())
        known = {}
        for sts in sets:
            role = sts["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            svc = services[sts["spec"]["serviceName"]]
            for i in range(sts["spec"]["replicas"]):
                # A pod's DNS name under its StatefulSet's governing Service.
                known[f"{sts['metadata']['name']}-{i}.{svc['metadata']['name']}.{NAMESPACE}.svc"] \
                    = (role, i)
        for sts in sets:
            labels = sts["spec"]["template"]["metadata"]["labels"]
            role = labels["app.kubernetes.io/component"]
            (container,) = sts["spec"]["template"]["spec"]["containers"]
            port = services[sts["spec"]["serviceName"]]["spec"]["ports"][0]["port"]
            for i in range(sts["spec"]["replicas"]):
                pod = f"{sts['metadata']['name']}-{i}"
                env = render_env(container, labels, {"HOSTNAME": pod})
                if run_pod(entrypoint, bins, container, env, f"{workers_file}: pod {pod}", role,
                           known, port) is not None:
                    counts["pods"] += 1

    # JobSet: pods <jobset>-<rjob>-<job index>-<completion index> under subdomain <jobset>.
    (js,) = load(k8s_dir, "jobset.yaml")
    name = js["metadata"]["name"]
    subdomain = js["spec"]["network"].get("subdomain", name)
    known = {}
    for rjob in js["spec"]["replicatedJobs"]:
        for i in range(rjob["template"]["spec"]["completions"]):
            known[f"{name}-{rjob['name']}-0-{i}.{subdomain}.{NAMESPACE}.svc"] = (rjob["name"], i)
    for rjob in js["spec"]["replicatedJobs"]:
        template = rjob["template"]["spec"]["template"]
        # JobSet adds its labels to every pod; an Indexed Job sets JOB_COMPLETION_INDEX.
        labels = dict(template["metadata"]["labels"],
                      **{"jobset.sigs.k8s.io/jobset-name": name,
                         "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"]})
        (container,) = template["spec"]["containers"]
        port = container.get("ports", [{"containerPort": 2222}])[0]["containerPort"]
        for i in range(rjob["template"]["spec"]["completions"]):
            pod = f"{name}-{rjob['name']}-0-{i}"
            env = render_env(container, labels, {"HOSTNAME": pod, "JOB_COMPLETION_INDEX": str(i)})
            if run_pod(entrypoint, bins, container, env, f"jobset.yaml: pod {pod}", rjob["name"],
                       known, port) is not None:
                counts["pods"] += 1

    # TFJob: the training operator writes TF_CONFIG: <tfjob>-<type>-<i>.<namespace>.svc:<port>
    # (a Service per pod), the evaluator left out of the cluster.
    (tj,) = load(k8s_dir, "tfjob.yaml")
    name = tj["metadata"]["name"]
    specs = tj["spec"]["tfReplicaSpecs"]

    def tf_port(rspec):
        for c in rspec["template"]["spec"]["containers"]:
            for p in c.get("ports", []):
                if c["name"] == TFJOB_CONTAINER and p["name"] == TFJOB_PORT_NAME:
                    return p["containerPort"]
        return 2222  # the operator's default

    cluster, known = {}, {}
    for rtype, rspec in specs.items():
        job = TFJOB_REPLICA_TYPES[rtype]
        if job == "evaluator":
            continue
        cluster[job] = [f"{name}-{job}-{i}.{NAMESPACE}.svc:{tf_port(rspec)}"
                        for i in range(rspec["replicas"])]
        for i in range(rspec["replicas"]):
            known[f"{name}-{job}-{i}.{NAMESPACE}.svc"] = (job, i)
    for rtype, rspec in specs.items():
        job = TFJOB_REPLICA_TYPES[rtype]
        (container,) = [c for c in rspec["template"]["spec"]["containers"]
                        if c["name"] == TFJOB_CONTAINER]
        for i in range(rspec["replicas"]):
            written = {"cluster": cluster, "task": {"type": job, "index": i},
                       "environment": "cloud"}
            env = render_env(container, rspec["template"]["metadata"]["labels"],
                             {"HOSTNAME": f"{name}-{job}-{i}", "TF_CONFIG": json.dumps(written)})
            got = run_pod(entrypoint, bins, container, env, f"tfjob.yaml: pod {name}-{job}-{i}",
                          job, known, tf_port(rspec))
            if got is not None:
                counts["pods"] += 1
                if got != written:
                    problem(f"tfjob.yaml: {job}-{i}", "the entrypoint changed TFJob's TF_CONFIG")
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", choices=["schemas", "tf_config"], required=True)
    parser.add_argument("--k8s_dir", required=True)
    parser.add_argument("--repo", default=".")
    parser.add_argument("--entrypoint")
    parser.add_argument("--bin", action="append", default=[], help="ROLE=PATH")
    args = parser.parse_args()
    if args.check == "schemas":
        counts = check_schemas(args.k8s_dir, args.repo)
    else:
        bins = dict(b.split("=", 1) for b in args.bin)
        counts = check_tf_config(args.k8s_dir, args.entrypoint, bins)
    counts["problems"] = len(problems)
    print("RESULT " + json.dumps(counts, sort_keys=True))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
