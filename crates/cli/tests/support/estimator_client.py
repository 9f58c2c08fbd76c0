"""A gRPC client of Karmada's scheduler-estimator service written with grpcio, outside the
project's own code: stubs compiled by grpcio-tools from crates/estimator/proto, requests
encoded by Python's protobuf runtime. Asks the estimator at ADDRESS and prints the answers
as one JSON object.

    python estimator_client.py ADDRESS STUBS_DIR
"""

import json
import sys

sys.path.insert(0, sys.argv[2])

import grpc  # noqa: E402
from k8s import core_pb2, quantity_pb2  # noqa: E402
from pkg.estimator.pb import estimator_pb2 as pb  # noqa: E402
from pkg.estimator.service import service_pb2_grpc  # noqa: E402


def quantity(text):
    return quantity_pb2.Quantity(string=text).SerializeToString()


def main():
    address = sys.argv[1]
    out = {}
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=20)
        stub = service_pb2_grpc.EstimatorStub(channel)

        # One GPU (a claim from the member's template) plus CPU and memory per replica.
        gpu = pb.ReplicaRequirements(
            namespace="ml",
            resourceRequestBytes={"cpu": quantity("4"), "memory": quantity("32Gi")},
            resourceClaimRefs=[pb.ResourceClaimReference(resourceClaimTemplateName="one-gpu")],
        )
        reply = stub.MaxAvailableReplicas(
            pb.MaxAvailableReplicasRequest(cluster="gpu-cluster", replicaRequirements=gpu),
            timeout=20,
        )
        out["gpu_replicas"] = reply.maxReplicas

        # CPU only, tolerating nothing, on nodes of a zone no node has.
        elsewhere = pb.ReplicaRequirements(
            namespace="ml",
            resourceRequestBytes={"cpu": quantity("500m")},
            nodeClaim=pb.NodeClaim(nodeSelector={"topology.kubernetes.io/zone": "nowhere"}),
        )
        reply = stub.MaxAvailableReplicas(
            pb.MaxAvailableReplicasRequest(cluster="gpu-cluster", replicaRequirements=elsewhere),
            timeout=20,
        )
        out["nowhere_replicas"] = reply.maxReplicas

        # A toleration, encoded as Karmada encodes core/v1 Tolerations.
        tolerating = pb.ReplicaRequirements(
            namespace="ml",
            resourceRequestBytes={"cpu": quantity("1")},
            nodeClaim=pb.NodeClaim(
                tolerationsBytes=[
                    core_pb2.Toleration(
                        key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"
                    ).SerializeToString()
                ]
            ),
        )
        reply = stub.MaxAvailableReplicas(
            pb.MaxAvailableReplicasRequest(cluster="gpu-cluster", replicaRequirements=tolerating),
            timeout=20,
        )
        out["tolerating_replicas"] = reply.maxReplicas

        # Bytes that are not a Quantity: InvalidArgument, and the server keeps serving.
        bad = pb.ReplicaRequirements(namespace="ml", resourceRequestBytes={"cpu": b"\xff\xff"})
        try:
            stub.MaxAvailableReplicas(
                pb.MaxAvailableReplicasRequest(cluster="gpu-cluster", replicaRequirements=bad),
                timeout=20,
            )
            out["bad"] = "answered"
        except grpc.RpcError as e:
            out["bad"] = e.code().name
            out["bad_message"] = e.details()

        # Another cluster's name: InvalidArgument.
        try:
            stub.MaxAvailableReplicas(
                pb.MaxAvailableReplicasRequest(cluster="other", replicaRequirements=gpu),
                timeout=20,
            )
            out["other"] = "answered"
        except grpc.RpcError as e:
            out["other"] = e.code().name

        reply = stub.MaxAvailableReplicas(
            pb.MaxAvailableReplicasRequest(cluster="gpu-cluster", replicaRequirements=gpu),
            timeout=20,
        )
        out["gpu_replicas_again"] = reply.maxReplicas
    print(json.dumps(out))


main()
