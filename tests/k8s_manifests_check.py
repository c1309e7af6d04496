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
                     TLS (tls.yaml, cert-manager.io/v1, whose CRDs' schemas are not shipped here
                     either): the Issuers' and Certificates' fields against cert-manager's API
                     (known fields, types, required ones, values), the chain (self-signed
                     Issuer, CA Certificate, CA Issuer, one Certificate per role with its
                     spiffe://shardps/<role> URI), and every pod mounting its role's Secret
                     whole (no subPath) and naming its files to the daemon with mutual TLS;
                     without tls.yaml (generate.py --tls off), every daemon says --insecure.
  --check=tf_config  renders every pod of every form as Kubernetes would (hostname, env with the
                     downward API, namespace; TFJob's TF_CONFIG as the training operator writes
                     it), runs the entrypoint with SHARDPS_ENTRYPOINT_DRY_RUN=1, and checks that
                     the role's daemon accepts the TF_CONFIG and the container's args
                     (--validate_config), that it runs the right daemon with those args, and
                     that every address in TF_CONFIG names a pod of the manifests under its
                     Service (or JobSet subdomain) on the port the pod serves. With tls.yaml, the
                     daemons read certificates made as its Certificates say (openssl), in place
                     of the mounted Secrets, and every address's host is one its pod's
                     certificate names (openssl verify -verify_hostname, in the certificates'
                     namespace).

Prints one line per problem and, last, `RESULT {json}` with counts; exits 1 on any problem.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.29.0"
ROLES = ("chief", "ps", "worker", "evaluator")
NAMESPACE = "shardps-test"  # not "default": shows that the namespace comes from the pod
PLAIN_FILES = ("common.yaml", "cluster.yaml", "workers-gpu.yaml", "workers-cpu.yaml",
               "workers-python.yaml", "submit-job.yaml")
TLS_FILE = "tls.yaml"
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
# cert-manager.io/v1 (github.com/cert-manager/cert-manager, pkg/apis/certmanager/v1, types_*.go).
ISSUER_SPEC = {"selfSigned", "ca", "acme", "vault", "venafi"}  # exactly one
SELF_SIGNED = {"crlDistributionPoints"}
CA_ISSUER = {"secretName", "crlDistributionPoints", "ocspServers", "issuingCertificateURL"}
CERTIFICATE_SPEC = {"subject", "literalSubject", "commonName", "duration", "renewBefore",
                    "renewBeforePercentage", "dnsNames", "ipAddresses", "uris", "otherNames",
                    "emailAddresses", "secretName", "secretTemplate", "keystores", "issuerRef",
                    "isCA", "usages", "privateKey", "encodeUsagesInRequest",
                    "revisionHistoryLimit", "additionalOutputFormats", "nameConstraints"}
CERTIFICATE_REQUIRED = {"secretName", "issuerRef"}
CERTIFICATE_NAMES = ("commonName", "dnsNames", "ipAddresses", "uris", "emailAddresses",
                     "otherNames")  # at least one
CERTIFICATE_TYPES = {"commonName": str, "duration": str, "renewBefore": str, "dnsNames": list,
                     "ipAddresses": list, "uris": list, "emailAddresses": list,
                     "secretName": str, "issuerRef": dict, "isCA": bool, "usages": list,
                     "privateKey": dict, "renewBeforePercentage": int,
                     "revisionHistoryLimit": int, "encodeUsagesInRequest": bool}
ISSUER_REF = {"name", "kind", "group"}
PRIVATE_KEY = {"rotationPolicy", "encoding", "algorithm", "size"}
PRIVATE_KEY_VALUES = {"rotationPolicy": {"Never", "Always"}, "encoding": {"PKCS1", "PKCS8"},
                      "algorithm": {"RSA", "ECDSA", "Ed25519"}}
ECDSA_SIZES = {256, 384, 521}
KEY_USAGES = {"signing", "digital signature", "content commitment", "key encipherment",
              "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
              "decipher only", "any", "server auth", "client auth", "code signing",
              "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user",
              "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"}
GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|ns))+$")
DNS_NAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TLS_MOUNT = "/etc/shardps/tls"
CKPT_MOUNT = "/ckpt"
_CKPT_STANDIN = []


def ckpt_standin():
    """An existing directory in place of the checkpoint volume, for --validate_config."""
    if not _CKPT_STANDIN:
        _CKPT_STANDIN.append(tempfile.mkdtemp(prefix="k8s_ckpt_",
                                              dir=os.environ.get("TEST_TMPDIR")))
    return _CKPT_STANDIN[0]
TLS_ARGS = [f"--tls_cert_file={TLS_MOUNT}/tls.crt", f"--tls_key_file={TLS_MOUNT}/tls.key",
            f"--tls_ca_file={TLS_MOUNT}/ca.crt", "--tls_client_auth"]
TLS_ENV = {"SHARDPS_TLS_CERT_FILE": f"{TLS_MOUNT}/tls.crt",
           "SHARDPS_TLS_KEY_FILE": f"{TLS_MOUNT}/tls.key",
           "SHARDPS_TLS_CA_FILE": f"{TLS_MOUNT}/ca.crt", "SHARDPS_TLS_CLIENT_AUTH": "true"}
SERVER_ROLES = ("chief", "ps", "worker", "evaluator")

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


def check_daemon_pod(pod_spec, role, where, certs, container_name="shardps", port_name="grpc",
                     serves=True):
    """Daemon containers: the entrypoint, the port (not where TF_CONFIG leaves the task out),
    probes on the plaintext health port, or for a user's script on its own port (a TCP connect
    with TLS: kubelet's gRPC probes cannot speak it), and TLS (check_tls_pod)."""
    containers = [c for c in pod_spec["containers"] if c["name"] == container_name]
    if len(containers) != 1:
        problem(where, f"no container named {container_name!r}")
        return
    c = containers[0]
    if c.get("command") != ["/usr/local/bin/shardps-entrypoint"]:
        problem(where, f"command {c.get('command')} is not the entrypoint")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    # A user's script (workers-python.yaml): shardps.Worker / shardps.Evaluator.
    script = any(e.get("name") == "SHARDPS_PYTHON_SCRIPT" for e in c.get("env", []))
    if (serves or script) and port_name not in ports:
        problem(where, f"no container port named {port_name}")
    if script:
        for probe in ("readinessProbe", "livenessProbe"):
            p = c.get(probe, {})
            ok = p.get("tcpSocket", {}).get("port") in (port_name, ports.get(port_name)) \
                if certs is not None else p.get("grpc", {}).get("port") == ports.get(port_name)
            if not ok:
                problem(where, f"{probe} is not a {'TCP' if certs is not None else 'gRPC'} probe "
                        f"on port {port_name}")
    else:
        health = ports.get("health")
        if health is None:
            problem(where, "no container port named health (the plaintext health port)")
        elif f"--health_port={health}" not in c.get("args", []):
            problem(where, f"args do not say --health_port={health}")
        for probe in ("readinessProbe", "livenessProbe"):
            if c.get(probe, {}).get("grpc", {}).get("port") != health:
                problem(where, f"{probe} is not a gRPC probe on the health port")
    check_tls_pod(pod_spec, c, role, where, certs, script)
    # deploy/image's two images under one name: the GPU one exactly where a GPU is asked for.
    wants_gpu = "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
    base = "shardps-python:latest" if script else "shardps:latest"
    expected = base + "-gpu" if wants_gpu else base
    if c.get("image") != expected:
        problem(where, f"image {c.get('image')!r}, expected {expected!r} "
                       f"({'a GPU' if wants_gpu else 'no GPU'} asked for)")


def check_tls_pod(pod_spec, c, role, where, certs, script=False):
    """With tls.yaml (`certs`: its leaf Certificates by secretName): the container mounts its
    role's Secret whole at TLS_MOUNT and gives the daemon (a script: by the environment) its
    files and mutual TLS. Without: it says --insecure (SHARDPS_INSECURE=1)."""
    args = c.get("args", [])
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if certs is None:
        if (env.get("SHARDPS_INSECURE") != "1") if script else ("--insecure" not in args):
            problem(where, "no tls.yaml (TLS off), but the container does not say --insecure")
        if any(a.startswith("--tls_") for a in args) or any(k.startswith("SHARDPS_TLS_")
                                                            for k in env):
            problem(where, "TLS settings without tls.yaml")
        return
    if "--insecure" in args or "SHARDPS_INSECURE" in env:
        problem(where, "--insecure beside TLS")
    if script:
        missing = sorted(k for k, v in TLS_ENV.items() if env.get(k) != v)
        if missing:
            problem(where, f"the script's environment lacks {missing}")
    else:
        missing = [a for a in TLS_ARGS if a not in args]
        if missing:
            problem(where, f"args lack {missing}")
    mounts = [m for m in c.get("volumeMounts", []) if m.get("mountPath") == TLS_MOUNT]
    if len(mounts) != 1:
        problem(where, f"nothing mounted at {TLS_MOUNT}")
        return
    mount = mounts[0]
    if "subPath" in mount or "subPathExpr" in mount:
        problem(where, f"{TLS_MOUNT} is mounted with a subPath: a renewed certificate would not "
                "reach the pod")
    if not mount.get("readOnly"):
        problem(where, f"{TLS_MOUNT} is not mounted readOnly")
    volume = {v["name"]: v for v in pod_spec.get("volumes", [])}.get(mount["name"], {})
    secret = volume.get("secret", {})
    if "items" in secret:
        problem(where, "the TLS Secret's keys are remapped (items): the daemon reads tls.crt, "
                "tls.key, ca.crt")
    cert = certs.get(secret.get("secretName"))
    if cert is None:
        problem(where, f"{TLS_MOUNT} is not the Secret of a Certificate in {TLS_FILE} "
                f"(volume {mount['name']!r}: {volume})")
    elif cert["spec"].get("uris") != [f"spiffe://shardps/{role}"]:
        problem(where, f"mounts {secret['secretName']}, whose Certificate {cert['name']} says "
                f"{cert['spec'].get('uris')}, not spiffe://shardps/{role}")


# --- cert-manager ------------------------------------------------------------------------------
def go_seconds(duration):
    """Seconds in a Go duration ("2160h", "1h30m")."""
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    return sum(float(n) * unit[u] for n, u in re.findall(r"([0-9.]+)(h|ms|us|ns|m|s)", duration))


def check_issuer(spec, where):
    kinds = [k for k in spec if k in ISSUER_SPEC]
    unknown_keys(spec, ISSUER_SPEC, where + " spec")
    if len(kinds) != 1:
        problem(where, f"spec must hold exactly one of {sorted(ISSUER_SPEC)}, has {kinds}")
    if "selfSigned" in spec:
        if not isinstance(spec["selfSigned"], dict):
            problem(where, "spec.selfSigned is not an object")
        else:
            unknown_keys(spec["selfSigned"], SELF_SIGNED, where + " spec.selfSigned")
    if "ca" in spec:
        ca = spec["ca"]
        if not isinstance(ca, dict):
            problem(where, "spec.ca is not an object")
            return
        unknown_keys(ca, CA_ISSUER, where + " spec.ca")
        if not isinstance(ca.get("secretName"), str) or not OBJECT_NAME.match(ca["secretName"]):
            problem(where, f"spec.ca.secretName (required) {ca.get('secretName')!r}")


def check_certificate(spec, where):
    unknown_keys(spec, CERTIFICATE_SPEC, where + " spec")
    for key in sorted(CERTIFICATE_REQUIRED - set(spec)):
        problem(where, f"spec.{key} is required")
    for key, kind in CERTIFICATE_TYPES.items():
        if key in spec and (not isinstance(spec[key], kind) or
                            (kind is int and isinstance(spec[key], bool))):
            problem(where, f"spec.{key} is not a {kind.__name__}: {spec[key]!r}")
    if not any(spec.get(k) for k in CERTIFICATE_NAMES):
        problem(where, f"names nothing: one of {list(CERTIFICATE_NAMES)} is required")
    for key in ("dnsNames", "uris", "ipAddresses", "emailAddresses", "usages"):
        if isinstance(spec.get(key), list) and not all(isinstance(v, str) for v in spec[key]):
            problem(where, f"spec.{key} holds a value that is not a string")
    for name in spec.get("dnsNames", []) if isinstance(spec.get("dnsNames"), list) else []:
        if isinstance(name, str) and (not DNS_NAME.match(name) or len(name) > 253):
            problem(where, f"dnsNames: {name!r} is not a DNS name")
    for uri in spec.get("uris", []) if isinstance(spec.get("uris"), list) else []:
        if isinstance(uri, str) and not re.match(r"^[a-z][a-z0-9+.-]*://[^ ]+$", uri):
            problem(where, f"uris: {uri!r} is not a URI")
    for key in ("duration", "renewBefore"):
        if isinstance(spec.get(key), str) and not GO_DURATION.match(spec[key]):
            problem(where, f"spec.{key} {spec[key]!r} is not a Go duration (\"2160h\")")
    if isinstance(spec.get("duration"), str) and isinstance(spec.get("renewBefore"), str) and \
            go_seconds(spec["renewBefore"]) >= go_seconds(spec["duration"]):
        problem(where, "spec.renewBefore is not shorter than spec.duration")
    if isinstance(spec.get("secretName"), str) and not OBJECT_NAME.match(spec["secretName"]):
        problem(where, f"spec.secretName {spec['secretName']!r} is not an object name")
    ref = spec.get("issuerRef")
    if isinstance(ref, dict):
        unknown_keys(ref, ISSUER_REF, where + " spec.issuerRef")
        if not isinstance(ref.get("name"), str):
            problem(where, "spec.issuerRef.name is required")
        if ref.get("kind", "Issuer") not in ("Issuer", "ClusterIssuer") or \
                ref.get("group", "cert-manager.io") != "cert-manager.io":
            problem(where, f"spec.issuerRef {ref} is not a cert-manager Issuer or ClusterIssuer")
    key = spec.get("privateKey")
    if isinstance(key, dict):
        unknown_keys(key, PRIVATE_KEY, where + " spec.privateKey")
        for field, values in PRIVATE_KEY_VALUES.items():
            if field in key and key[field] not in values:
                problem(where, f"spec.privateKey.{field} {key[field]!r} is not one of "
                        f"{sorted(values)}")
        if key.get("algorithm") == "ECDSA" and key.get("size", 256) not in ECDSA_SIZES:
            problem(where, f"spec.privateKey.size {key.get('size')} for ECDSA")
    if isinstance(spec.get("usages"), list):
        for usage in set(spec["usages"]) - KEY_USAGES:
            problem(where, f"spec.usages: {usage!r} is not a key usage")


def check_cert_manager(k8s_dir, counts):
    """tls.yaml's objects; returns its leaf Certificates by secretName ({"name", "spec"}), or
    None without tls.yaml."""
    if not os.path.exists(os.path.join(k8s_dir, TLS_FILE)):
        return None
    issuers, certificates = {}, {}
    for obj in load(k8s_dir, TLS_FILE):
        meta = obj.get("metadata", {})
        where = f"{TLS_FILE}: {obj.get('kind')}/{meta.get('name')}"
        unknown_keys(obj, {"apiVersion", "kind", "metadata", "spec"}, where)
        if obj.get("apiVersion") != "cert-manager.io/v1":
            problem(where, f"apiVersion {obj.get('apiVersion')!r}, not cert-manager.io/v1")
        unknown_keys(meta, {"name", "labels", "annotations"}, where + " metadata")
        name = meta.get("name", "")
        if not isinstance(name, str) or not OBJECT_NAME.match(name) or len(name) > 253:
            problem(where, f"metadata.name {name!r} is not an object name")
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            problem(where, "spec is required")
            continue
        if obj.get("kind") == "Issuer":
            check_issuer(spec, where)
            issuers[name] = spec
        elif obj.get("kind") == "Certificate":
            check_certificate(spec, where)
            certificates[name] = spec
        else:
            problem(where, "neither an Issuer nor a Certificate")
            continue
        counts["cert_manager_objects"] += 1
    # The chain: self-signed Issuer -> CA Certificate -> CA Issuer -> one Certificate per role.
    self_signed = {n for n, s in issuers.items() if "selfSigned" in s}
    ca_issuers = {n: s["ca"].get("secretName") for n, s in issuers.items()
                  if isinstance(s.get("ca"), dict)}
    cas = {n: s for n, s in certificates.items() if s.get("isCA")}
    if len(self_signed) != 1 or len(ca_issuers) != 1 or len(cas) != 1:
        problem(TLS_FILE, f"not one self-signed Issuer ({sorted(self_signed)}), one CA "
                f"Certificate ({sorted(cas)}) and one CA Issuer ({sorted(ca_issuers)})")
    for name, spec in cas.items():
        if spec.get("issuerRef", {}).get("name") not in self_signed:
            problem(f"{TLS_FILE}: Certificate/{name}", "the CA is not issued by the self-signed "
                    "Issuer")
    for name, secret in ca_issuers.items():
        if secret not in {s.get("secretName") for s in cas.values()}:
            problem(f"{TLS_FILE}: Issuer/{name}", f"signs with Secret {secret!r}, which is no CA "
                    "Certificate's")
    leaves, roles = {}, []
    for name, spec in certificates.items():
        if spec.get("isCA"):
            continue
        where = f"{TLS_FILE}: Certificate/{name}"
        ref = spec.get("issuerRef", {})
        if ref.get("name") not in ca_issuers or ref.get("kind", "Issuer") != "Issuer":
            problem(where, f"not issued by the CA Issuer: issuerRef {ref}")
        uris = spec.get("uris", [])
        m = re.match(r"^spiffe://shardps/([a-z]+)$", uris[0]) if len(uris) == 1 else None
        if m is None or m.group(1) not in ("admin",) + SERVER_ROLES:
            problem(where, f"uris {uris}: not one spiffe://shardps/<role>")
            continue
        role = m.group(1)
        roles.append(role)
        usages = set(spec.get("usages", []))
        if "client auth" not in usages:
            problem(where, "usages lack client auth (mutual TLS)")
        if role != "admin" and ("server auth" not in usages or not spec.get("dnsNames")):
            problem(where, f"a {role} serves: it needs server auth and dnsNames")
        key = spec.get("privateKey", {})
        if key.get("rotationPolicy") != "Always":
            problem(where, "privateKey.rotationPolicy is not Always (a renewal keeps the key)")
        leaves[spec.get("secretName")] = {"name": name, "spec": spec}
    for role in ("admin", "chief", "ps", "worker"):
        if roles.count(role) != 1:
            problem(TLS_FILE, f"{roles.count(role)} Certificates for role {role}, not 1")
    return leaves


def check_schemas(k8s_dir, repo, generator=None):
    counts = {"validated": 0, "crd_templates_validated": 0, "kinds": {},
              "cert_manager_objects": 0}
    certs = check_cert_manager(k8s_dir, counts)
    counts["tls"] = certs is not None
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
            check_daemon_pod(spec["template"]["spec"], role, where, certs)
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
            pod = obj["spec"]["template"]["spec"]
            (shardctl,) = pod["containers"]
            check_tls_pod(pod, shardctl, "admin", where, certs)
            chief = [a.split("=", 1)[1] for a in shardctl.get("args", [])
                     if a.startswith("--chief=")]
            chief_cert = [c for c in (certs or {}).values()
                          if c["spec"].get("uris") == ["spiffe://shardps/chief"]]
            if certs is not None and chief and chief_cert and \
                    chief[0].rpartition(":")[0] not in chief_cert[0]["spec"].get("dnsNames", []):
                problem(where, f"--chief={chief[0]}: the chief's certificate does not name it")
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
        check_daemon_pod(pod, rjob["name"], rwhere, certs)
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
        # TFJob leaves the evaluator out of TF_CONFIG's cluster: it listens on no TFJob port.
        check_daemon_pod(rspec["template"]["spec"], TFJOB_REPLICA_TYPES.get(rtype, "?"), rwhere,
                         certs, container_name=TFJOB_CONTAINER, port_name=TFJOB_PORT_NAME,
                         serves=rtype != "Evaluator")

    # generate.py's output for these options: TLS off without tls.yaml, else the certificates'
    # namespace.
    options = ["--tls", "off"]
    if certs is not None:
        namespaces = {n.split(".")[-2] for c in certs.values()
                      for n in c["spec"].get("dnsNames", []) if n.endswith(".svc")}
        options = ["--namespace", sorted(namespaces)[0]] if len(namespaces) == 1 else []
    gen = subprocess.run([sys.executable, generator or os.path.join(k8s_dir, "generate.py"),
                          "--check", "--out", k8s_dir] + options, capture_output=True, text=True)
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


# --- TLS: certificates as tls.yaml's Certificates say, where the pods mount their Secrets. ------
def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_certs(k8s_dir, tmp):
    """For each leaf Certificate of tls.yaml, a directory laid out as its Secret (tls.crt,
    tls.key, ca.crt) holding a certificate with the Certificate's dnsNames and uris, made by
    openssl and signed by one CA: {secretName: dir}, and the namespaces its .svc names are
    for. ({}, set()) without tls.yaml."""
    if not os.path.exists(os.path.join(k8s_dir, TLS_FILE)):
        return {}, set()
    leaves = {o["spec"]["secretName"]: o["spec"] for o in load(k8s_dir, TLS_FILE)
              if o.get("kind") == "Certificate" and not o["spec"].get("isCA")}
    ca_key, ca_crt = os.path.join(tmp, "ca.key"), os.path.join(tmp, "ca.crt")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=test-ca", "-keyout", ca_key,
            "-out", ca_crt)
    dirs, namespaces = {}, set()
    for secret, spec in leaves.items():
        d = os.path.join(tmp, secret)
        os.makedirs(d)
        sans = [f"DNS:{n}" for n in spec.get("dnsNames", [])] + \
            [f"URI:{u}" for u in spec.get("uris", [])]
        with open(os.path.join(d, "ext"), "w") as f:
            f.write("subjectAltName=" + ",".join(sans) + "\n")
        openssl("req", *ec, "-subj", f"/CN={secret}", "-keyout", os.path.join(d, "tls.key"),
                "-out", os.path.join(d, "tls.csr"))
        openssl("x509", "-req", "-in", os.path.join(d, "tls.csr"), "-CA", ca_crt, "-CAkey", ca_key,
                "-CAcreateserial", "-days", "2", "-extfile", os.path.join(d, "ext"),
                "-out", os.path.join(d, "tls.crt"))
        with open(ca_crt) as src, open(os.path.join(d, "ca.crt"), "w") as dst:
            dst.write(src.read())
        dirs[secret] = d
        namespaces |= {n.split(".")[-2] for n in spec.get("dnsNames", []) if n.endswith(".svc")}
    return dirs, namespaces


def secret_dir(pod_spec, container, dirs):
    """Where this test put the Secret the container mounts at TLS_MOUNT (None: none)."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        if mount.get("mountPath") == TLS_MOUNT:
            secret = volumes.get(mount["name"], {}).get("secret", {}).get("secretName")
            return dirs.get(secret)
    return None


def verify_names(form, host_dirs, cert_namespaces, counts):
    """Each pod's DNS name is one the certificate its pod mounts names (as a client checks it,
    openssl verify -verify_hostname), in the namespace the certificates are for."""
    if not host_dirs:
        return
    if len(cert_namespaces) != 1:
        problem(TLS_FILE, f"the certificates name namespaces {sorted(cert_namespaces)}, not one")
        return
    (cert_ns,) = cert_namespaces
    for host, d in sorted(host_dirs.items()):
        name = host.replace(f".{NAMESPACE}.svc", f".{cert_ns}.svc")
        if d is None:
            problem(f"{form}: {host}", f"its pod mounts no certificate at {TLS_MOUNT}")
            continue
        out = subprocess.run(["openssl", "verify", "-CAfile", os.path.join(d, "ca.crt"),
                              "-verify_hostname", name, os.path.join(d, "tls.crt")],
                             capture_output=True, text=True)
        if out.returncode != 0:
            problem(f"{form}: {host}", f"the certificate its pod mounts "
                    f"({os.path.basename(d)}) does not name {name}: {out.stdout.strip()} "
                    f"{out.stderr.strip()}")
        else:
            counts["tls_names_verified"] += 1


def run_pod(entrypoint, bins, container, env, where, expect_role, known_hosts, port,
            tls_dir=None):
    """Dry-runs the entrypoint, checks the daemon accepts the result; returns TF_CONFIG.
    `tls_dir`: where the pod's TLS Secret is, in place of TLS_MOUNT."""
    args = container.get("args", [])
    # A daemon that keeps files is confined to the checkpoint volume (docs/security.md).
    mounts = {m.get("mountPath") for m in container.get("volumeMounts", [])}
    if expect_role != "worker" and not env.get("SHARDPS_PYTHON_SCRIPT"):
        if f"--data_root={CKPT_MOUNT}" not in args or CKPT_MOUNT not in mounts:
            problem(where, f"no --data_root={CKPT_MOUNT} on the mounted checkpoint volume")
    args = [a.replace(f"--data_root={CKPT_MOUNT}", f"--data_root={ckpt_standin()}")
            for a in args]
    if tls_dir is not None:
        args = [a.replace(TLS_MOUNT, tls_dir) for a in args]
        env = {k: v.replace(TLS_MOUNT, tls_dir) for k, v in env.items()}
    container = dict(container, args=args)
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
    # A script's TLS comes by the environment: the daemon checks that too.
    daemon_env = {k: v for k, v in env.items()
                  if script and (k.startswith("SHARDPS_TLS_") or k == "SHARDPS_INSECURE")}
    daemon_env.update({"TF_CONFIG": json.dumps(tf_config), "PATH": env["PATH"]})
    check = subprocess.run([bins[expect_role]] + ([] if script else container.get("args", [])) +
                           ["--validate_config"], env=daemon_env, capture_output=True, text=True)
    if check.returncode != 0 or "TF_CONFIG OK" not in check.stdout:
        problem(where, f"{expect_role} --validate_config exit {check.returncode}: "
                f"{check.stderr.strip()}")
    return tf_config


def check_tf_config(k8s_dir, entrypoint, bins):
    counts = {"pods": 0, "tls_names_verified": 0}
    tmp = tempfile.mkdtemp(prefix="k8s_tls_", dir=os.environ.get("TEST_TMPDIR"))
    dirs, cert_namespaces = make_certs(k8s_dir, tmp)
    counts["tls"] = bool(dirs)
    # Long-lived cluster: StatefulSet pods shardps-<role>-<ordinal> under Service shardps-<role>.
    for workers_file in ("workers-gpu.yaml", "workers-cpu.yaml", "workers-python.yaml"):
        objects = load(k8s_dir, "cluster.yaml") + load(k8s_dir, workers_file)
        services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
        # Applied after cluster.yaml, a StatefulSet of the same name replaces its own.
        sets = list({o["metadata"]["name"]: o for o in objects
                     if o["kind"] == "StatefulSet"}.values())
        known, host_dirs = {}, {}
        for sts in sets:
            role = sts["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            svc = services[sts["spec"]["serviceName"]]
            pod_spec = sts["spec"]["template"]["spec"]
            for i in range(sts["spec"]["replicas"]):
                # A pod's DNS name under its StatefulSet's governing Service.
                host = f"{sts['metadata']['name']}-{i}.{svc['metadata']['name']}.{NAMESPACE}.svc"
                known[host] = (role, i)
                if dirs:
                    host_dirs[host] = secret_dir(pod_spec, pod_spec["containers"][0], dirs)
        for sts in sets:
            labels = sts["spec"]["template"]["metadata"]["labels"]
            role = labels["app.kubernetes.io/component"]
            pod_spec = sts["spec"]["template"]["spec"]
            (container,) = pod_spec["containers"]
            port = services[sts["spec"]["serviceName"]]["spec"]["ports"][0]["port"]
            for i in range(sts["spec"]["replicas"]):
                pod = f"{sts['metadata']['name']}-{i}"
                env = render_env(container, labels, {"HOSTNAME": pod})
                if run_pod(entrypoint, bins, container, env, f"{workers_file}: pod {pod}", role,
                           known, port, secret_dir(pod_spec, container, dirs)) is not None:
                    counts["pods"] += 1
        verify_names(workers_file, host_dirs, cert_namespaces, counts)

    # JobSet: pods <jobset>-<rjob>-<job index>-<completion index> under subdomain <jobset>.
    (js,) = load(k8s_dir, "jobset.yaml")
    name = js["metadata"]["name"]
    subdomain = js["spec"]["network"].get("subdomain", name)
    known, host_dirs = {}, {}
    for rjob in js["spec"]["replicatedJobs"]:
        pod_spec = rjob["template"]["spec"]["template"]["spec"]
        for i in range(rjob["template"]["spec"]["completions"]):
            host = f"{name}-{rjob['name']}-0-{i}.{subdomain}.{NAMESPACE}.svc"
            known[host] = (rjob["name"], i)
            if dirs:
                host_dirs[host] = secret_dir(pod_spec, pod_spec["containers"][0], dirs)
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
                       known, port, secret_dir(template["spec"], container, dirs)) is not None:
                counts["pods"] += 1
    verify_names("jobset.yaml", host_dirs, cert_namespaces, counts)

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

    cluster, known, host_dirs = {}, {}, {}
    for rtype, rspec in specs.items():
        job = TFJOB_REPLICA_TYPES[rtype]
        if job == "evaluator":
            continue
        cluster[job] = [f"{name}-{job}-{i}.{NAMESPACE}.svc:{tf_port(rspec)}"
                        for i in range(rspec["replicas"])]
        pod_spec = rspec["template"]["spec"]
        (container,) = [c for c in pod_spec["containers"] if c["name"] == TFJOB_CONTAINER]
        for i in range(rspec["replicas"]):
            known[f"{name}-{job}-{i}.{NAMESPACE}.svc"] = (job, i)
            if dirs:
                host_dirs[f"{name}-{job}-{i}.{NAMESPACE}.svc"] = secret_dir(pod_spec, container,
                                                                            dirs)
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
                          job, known, tf_port(rspec),
                          secret_dir(rspec["template"]["spec"], container, dirs))
            if got is not None:
                counts["pods"] += 1
                if got != written:
                    problem(f"tfjob.yaml: {job}-{i}", "the entrypoint changed TFJob's TF_CONFIG")
    verify_names("tfjob.yaml", host_dirs, cert_namespaces, counts)
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", choices=["schemas", "tf_config"], required=True)
    parser.add_argument("--k8s_dir", required=True)
    parser.add_argument("--repo", default=".")
    parser.add_argument("--generator", help="generate.py (default: the one in --k8s_dir)")
    parser.add_argument("--entrypoint")
    parser.add_argument("--bin", action="append", default=[], help="ROLE=PATH")
    args = parser.parse_args()
    if args.check == "schemas":
        counts = check_schemas(args.k8s_dir, args.repo, args.generator)
    else:
        bins = dict(b.split("=", 1) for b in args.bin)
        counts = check_tf_config(args.k8s_dir, args.entrypoint, bins)
    counts["problems"] = len(problems)
    print("RESULT " + json.dumps(counts, sort_keys=True))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
