"""How `render --target k8s` deploys the graph through Dynamo's operator."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from .base import Strict

# A Kubernetes quantity as manifests write it (16Gi, 500m, 90Gi), and a DNS-1123 label.
QUANTITY_RE = re.compile(r"[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")
K8S_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
          "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, None: 1}


def quantity_bytes(quantity: str) -> float:
    """A Kubernetes quantity (16Gi, 500m, 90G) as a number (bytes for a size)."""
    match = QUANTITY_RE.fullmatch(quantity)
    assert match is not None, quantity  # the schema only lets valid quantities through
    number = float(quantity[:match.start(2)] if match.group(2) else quantity)
    return number * _UNITS[match.group(2)]


def _full_match(pattern: re.Pattern[str], example: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{value!r} is not valid here; write it like {example}")
        return value
    return AfterValidator(check)


def _schema_pattern(pattern: re.Pattern[str]) -> Any:
    # For `dis-serve schema` readers; validation itself is the full match above.
    return Field(json_schema_extra={"pattern": f"^(?:{pattern.pattern})$"})


Quantity = Annotated[str, _full_match(QUANTITY_RE, "16Gi, 8 or 500m"),
                     _schema_pattern(QUANTITY_RE)]
K8sName = Annotated[str, _full_match(K8S_NAME_RE, "model-cache (lower-case, digits, dashes)"),
                    _schema_pattern(K8S_NAME_RE)]
REVISION_RE = re.compile(r"[A-Za-z0-9._/-]+")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
Revision = Annotated[str, _full_match(REVISION_RE, "main or a commit hash"),
                     _schema_pattern(REVISION_RE)]
Digest = Annotated[str, _full_match(DIGEST_RE, "sha256: and 64 hex digits"),
                   _schema_pattern(DIGEST_RE)]


class RdmaProfile(StrEnum):
    NONE = "none"
    INFINIBAND = "infiniband"
    ROCE = "roce"

    @property
    def enabled(self) -> bool:
        return self is not RdmaProfile.NONE

    @property
    def default_resource(self) -> str | None:
        # NVIDIA's InfiniBand fabric profiles (recipes/addons/providers/nebius-ib.yaml,
        # aks-ib.yaml) request the RDMA device plugin's `rdma/ib`; RoCE resource names are
        # the cluster's own (GKE: networking.gke.io.networks/rdma-0 ...).
        return "rdma/ib" if self is RdmaProfile.INFINIBAND else None


class Rdma(Strict):
    """How KV-cache transfers reach the RDMA fabric from a worker pod."""

    profile: RdmaProfile = Field(
        default=RdmaProfile.NONE,
        description="none | infiniband | roce. Without it UCX falls back to TCP between "
                    "prefill and decode pods on different nodes.")
    resource_name: str | None = Field(
        default=None, min_length=1,
        description="Extended resource the RDMA device plugin offers (default for "
                    "infiniband: rdma/ib; required for roce).")
    resource_count: int = Field(
        default=1, ge=1, le=64,
        description="How many of it each worker requests. NVIDIA's IB profiles keep 1: it "
                    "is a device-plugin slot that grants all HCAs, not a per-GPU count.")
    ucx_net_devices: str | None = Field(
        default=None, min_length=1,
        description="UCX_NET_DEVICES (e.g. mlx5_0:1,mlx5_1:1) where nodes also carry "
                    "non-fabric NICs UCX could pick (NVIDIA's aks-ib profile needs it).")
    privileged: bool = Field(
        default=False,
        description="Run workers privileged, as NVIDIA's provider profiles do; only for "
                    "device plugins that need it. Default: IPC_LOCK only (pinning "
                    "registered memory), no privilege.")
    run_as_root: bool = Field(
        default=True,
        description="Workers run as root inside their container, with IPC_LOCK as their "
                    "only capability: a non-root user cannot use IPC_LOCK "
                    "(kubernetes/kubernetes#56374), and RDMA registration pins memory. "
                    "false: run as kubernetes.security.run_as_user and rely on the container "
                    "runtime's locked-memory limit (containerd: LimitMEMLOCK=infinity); "
                    "either way a worker checks at start and stops with one line if it "
                    "cannot lock memory.")

    @model_validator(mode="after")
    def _resource_known(self) -> Rdma:
        if self.profile is RdmaProfile.ROCE and self.resource_name is None:
            raise ValueError("rdma.profile is roce but rdma.resource_name is missing; set it "
                             "to your RDMA device plugin's resource (kubectl describe node)")
        return self

    @property
    def resource(self) -> str | None:
        if not self.profile.enabled:
            return None
        return self.resource_name or self.profile.default_resource


class ModelCache(Strict):
    """Where worker pods find the weights: one PersistentVolumeClaim, filled once."""

    pvc: K8sName | None = Field(
        default=None, description="PersistentVolumeClaim name (default: NAME-model-cache).")
    existing: bool = Field(
        default=False,
        description="The claim exists and holds the model already, in Hugging Face's cache "
                    "layout under huggingface/ (HF_HOME) or at the /model-cache/... path "
                    "model.id names: render neither the claim nor the download Job.")
    size: Quantity | None = Field(
        default=None,
        description="Claim size (default: the checkpoint's size plus a quarter, in 10Gi "
                    "steps).")
    storage_class: str | None = Field(
        default=None, min_length=1,
        description="StorageClass of the claim; it must offer ReadWriteMany (worker pods on "
                    "several nodes mount it). Default: the cluster's default class.")
    hf_token_secret: K8sName = Field(
        default="hf-token-secret",
        description="Secret with HF_TOKEN, read by the download Job only.")

    @model_validator(mode="before")
    @classmethod
    def _revision_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "revision" in data:
            raise ValueError("kubernetes.model_cache.revision moved to model.revision (every "
                             "target reads it); write it there")
        return data


class ServiceExposure(StrEnum):
    CLUSTER_IP = "cluster-ip"
    NODE_PORT = "node-port"
    LOAD_BALANCER = "load-balancer"

    @property
    def service_type(self) -> str | None:
        """The extra Service to render (None: the operator's ClusterIP Service is enough)."""
        return {ServiceExposure.CLUSTER_IP: None, ServiceExposure.NODE_PORT: "NodePort",
                ServiceExposure.LOAD_BALANCER: "LoadBalancer"}[self]


class Toleration(Strict):
    key: str = Field(min_length=1, description="Taint key, e.g. nvidia.com/gpu.")
    operator: Literal["Exists", "Equal"] = Field(
        default="Exists", description="Exists | Equal.")
    value: str | None = Field(default=None, description="Taint value (operator Equal).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="NoSchedule | PreferNoSchedule | NoExecute (default: all).")


class PodSecurity(Strict):
    """Pod-level identity. NVIDIA's Dynamo runtime images run as user `dynamo` (uid 1000,
    group 0); their model-download recipe uses the same ids."""

    run_as_user: int = Field(default=1000, ge=1, description="Non-root uid of every pod.")
    run_as_group: int = Field(default=0, ge=0, description="Primary gid.")
    fs_group: int = Field(default=0, ge=0, description="Group that owns mounted volumes.")


class ComputeResources(Strict):
    """CPU and memory for one pod (requests = limits: the Guaranteed QoS class)."""

    cpu: Quantity | None = Field(default=None, description="CPU, e.g. 8 or 500m.")
    memory: Quantity | None = Field(default=None, description="Memory, e.g. 64Gi.")


class IssuerRef(Strict):
    """A cert-manager issuer that signs the graph's certificates."""

    name: K8sName = Field(description="The Issuer's (or ClusterIssuer's) name.")
    kind: Literal["Issuer", "ClusterIssuer"] = Field(
        default="Issuer", description="Issuer (in the graph's namespace) | ClusterIssuer.")
    group: str = Field(default="cert-manager.io", min_length=1,
                       description="API group of the issuer (external issuers have their own).")


class CertificateSource(StrEnum):
    """Who makes the Secrets the graph's pods mount."""

    SECRETS = "secrets"
    CERT_MANAGER = "cert-manager"
    EXISTING = "existing"


class KubernetesTls(Strict):
    """Where the graph's certificates live in the cluster (`security.tls` on Kubernetes): two
    Secrets the pods mount, the frontend's and the pods' own, made by dis-serve (`secrets`),
    by cert-manager (`cert-manager`) or by you (`existing`)."""

    certificates: CertificateSource = Field(
        default=CertificateSource.SECRETS,
        description="secrets: `render` issues the graph's own CA and certificates and writes "
                    "them as Secret manifests (k8s/tls-secrets.yaml, kept across renders while "
                    "they fit); cert-manager: Certificate objects, signed by `issuer` or by a "
                    "CA Issuer rendered beside them; existing: you create the Secrets "
                    "(`render` prints the commands).")
    frontend_secret: K8sName | None = Field(
        default=None,
        description="Secret (tls.crt, tls.key, ca.crt) the frontend serves HTTPS with "
                    "(default: NAME-frontend-tls).")
    frontend_dns_names: list[str] = Field(
        default_factory=list,
        description="Names clients reach the frontend by besides its in-cluster Services "
                    "(a load balancer's DNS name).")
    client_secret: K8sName | None = Field(
        default=None,
        description="Secret (tls.crt, tls.key, ca.crt) of the pods' own certificate: every "
                    "Dynamo pod serves and calls the request plane with it (mutual TLS), and "
                    "presents it to the platform's etcd and NATS when `planes` is on "
                    "(default: NAME-client-tls).")
    planes: bool = Field(
        default=False,
        description="The platform's NATS (and etcd, where its discovery uses etcd) require "
                    "TLS client certificates. Dynamo's platform chart ships NATS without TLS "
                    "at a nats:// address and discovery through the Kubernetes API (no etcd): "
                    "false, its default, matches it.")
    etcd_endpoints: str | None = Field(
        default=None, min_length=1,
        description="planes: ETCD_ENDPOINTS of the platform's etcd over TLS (https://...), "
                    "where the operator injects a plain-HTTP one.")
    nats_server: str | None = Field(
        default=None, min_length=1,
        description="planes: NATS_SERVER of the platform's NATS over TLS (tls://...), where "
                    "the operator injects a nats:// one (Dynamo refuses TLS settings with it).")
    issuer: IssuerRef | None = Field(
        default=None,
        description="cert-manager: the issuer that signs the graph's certificates (a CA "
                    "issuer: its ca.crt lands in each Secret). Default: a self-signed CA and a "
                    "CA Issuer rendered for the graph.")

    @model_validator(mode="before")
    @classmethod
    def _issuer_means_cert_manager(cls, data: Any) -> Any:
        # Before `certificates` existed, naming an issuer was how to ask for cert-manager.
        if isinstance(data, dict) and data.get("issuer") and "certificates" not in data:
            return {**data, "certificates": CertificateSource.CERT_MANAGER.value}
        return data

    @model_validator(mode="after")
    def _schemes(self) -> KubernetesTls:
        if self.etcd_endpoints and not all(
                url.strip().startswith("https://") for url in self.etcd_endpoints.split(",")):
            raise ValueError(f"kubernetes.tls.etcd_endpoints {self.etcd_endpoints[:80]!r} must "
                             "be https:// URLs (comma-separated): etcd with TLS")
        if self.nats_server and not self.nats_server.startswith("tls://"):
            raise ValueError(f"kubernetes.tls.nats_server {self.nats_server[:80]!r} must start "
                             "with tls:// (Dynamo 1.6.1 refuses NATS TLS settings otherwise)")
        if (self.etcd_endpoints or self.nats_server) and not self.planes:
            raise ValueError("kubernetes.tls.etcd_endpoints / nats_server name the platform's "
                             "TLS endpoints, but kubernetes.tls.planes is false; set planes: "
                             "true (the platform's etcd and NATS require TLS) or remove them")
        return self

    @model_validator(mode="after")
    def _issuer_fits(self) -> KubernetesTls:
        if self.issuer is not None and self.certificates is not CertificateSource.CERT_MANAGER:
            raise ValueError(f"kubernetes.tls.issuer is set but kubernetes.tls.certificates is "
                             f"{self.certificates.value}; set certificates: cert-manager or "
                             "remove the issuer")
        own_ca = (self.certificates is CertificateSource.SECRETS
                  or (self.certificates is CertificateSource.CERT_MANAGER and self.issuer is None))
        if self.planes and own_ca:
            raise ValueError("kubernetes.tls.planes is true, but the pods' certificate would "
                             "come from the graph's own CA, which the platform's etcd and NATS "
                             "do not trust; set certificates: cert-manager with the issuer of "
                             "the platform's CA, or certificates: existing")
        return self


class Kubernetes(Strict):
    """How `render --target k8s` deploys the graph through Dynamo's operator."""

    namespace: K8sName = Field(
        default="default",
        description="Kubernetes namespace. The operator names the Dynamo namespace "
                    "NAMESPACE-NAME from it and the graph name.")
    image: str | None = Field(
        default=None, min_length=1,
        description="Runtime image (default: NVIDIA's Dynamo 1.6.1 image for the backend).")
    image_digest: Digest | None = Field(
        default=None,
        description="sha256:... to pin the image by content.")
    model_cache: ModelCache = Field(default_factory=ModelCache, description="Weights cache.")
    rdma: Rdma = Field(default_factory=Rdma, description="RDMA for KV-cache transfer.")
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels worker pods must match.")
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Taints worker pods tolerate (GPU node taints).")
    shared_memory: Quantity = Field(
        default="16Gi",
        description="/dev/shm size per pod (the operator's sharedMemorySize; it mounts "
                    "/dev/shm itself, 8Gi by default). NCCL between TP ranks uses it.")
    service: ServiceExposure = Field(
        default=ServiceExposure.CLUSTER_IP,
        description="cluster-ip | node-port | load-balancer. Nothing is public unless asked.")
    security: PodSecurity = Field(default_factory=PodSecurity, description="Pod identity.")
    frontend_resources: ComputeResources = Field(
        default_factory=ComputeResources,
        description="Frontend CPU/memory (default: CPU from frontend.planned_rate_per_s, "
                    "else 4 CPUs; 8Gi).")
    worker_resources: ComputeResources = Field(
        default_factory=ComputeResources,
        description="Worker CPU/memory (default: 8 CPUs and 32Gi per GPU, at least twice "
                    "the worker's weight shard plus /dev/shm).")
    tls: KubernetesTls = Field(
        default_factory=KubernetesTls,
        description="Secrets holding the frontend's and the pods' certificates, and "
                    "cert-manager's issuer for them.")
    metrics_namespaces: list[K8sName] = Field(
        default_factory=list,
        description="Namespaces (e.g. monitoring) allowed to scrape worker metrics past the "
                    "NetworkPolicy.")
