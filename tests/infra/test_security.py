"""Security posture of template.yaml beyond what checkov and cfn-lint check
(make test runs both, and fails on any failed check).

Auth and least privilege are held by tests/infra/test_template.py (every admin
route AWS_IAM under every ClientAuth; each function's policy names only its
own tables and actions); callers reading each other's idempotent responses by
tests/unit/test_idempotency.py. Here: that every checkov suppression is one that
was reviewed, sits on its resource, and says why.
"""

from __future__ import annotations

import re

# Suppressions reviewed, with where they may appear. A new one means a new
# review: add it here with the same care as its comment in template.yaml.
REVIEWED = {
    "CKV_AWS_76": {"Api"},  # access logging: needs an account-wide role
    "CKV_AWS_120": {"Api"},  # caching: would serve one ID twice
    "CKV_AWS_73": {"Api"},  # stage tracing: on unless Tracing is Disabled, an Fn::If checkov does not decide
    "CKV_AWS_116": {"NextFunction", "BatchFunction", "AdminFunction"},  # DLQ: synchronous invocations
    "CKV_AWS_117": {"NextFunction", "BatchFunction", "AdminFunction"},  # VPC: nothing to reach inside one
    "CKV_AWS_173": {"NextFunction", "BatchFunction", "AdminFunction"},  # env var KMS: no secrets there
    "CKV_AWS_119": {"CountersTable", "IdempotencyTable"},  # CMK: AWS managed key encrypts at rest
    "CKV_AWS_158": {
        "NextLogGroup",
        "BatchLogGroup",
        "AdminLogGroup",
    },  # CMK: CloudWatch Logs encrypts at rest
}


def suppressions(template):
    for logical_id, resource in template.resources.items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            yield logical_id, skip


def test_every_suppression_was_reviewed_and_says_why(template):
    found = list(suppressions(template))
    assert found
    for logical_id, skip in found:
        assert re.fullmatch(r"CKV_AWS_\d+", skip["id"]), skip
        assert logical_id in REVIEWED.get(skip["id"], set()), f"{skip['id']} on {logical_id} was not reviewed"
        assert len(skip.get("comment", "")) >= 60, f"{skip['id']} on {logical_id}: say why, in a sentence"


def test_no_suppression_of_what_matters_most(template):
    # Encryption at rest, point-in-time recovery, and no caching of responses
    # are not negotiable: they are set, never suppressed.
    ids = {skip["id"] for _, skip in suppressions(template)}
    assert not ids & {"CKV_AWS_28", "CKV_AWS_165"}  # DynamoDB PITR
    for table in ("CountersTable", "IdempotencyTable"):
        props = template.resources[table]["Properties"]
        assert props["SSESpecification"]["SSEEnabled"] is True
        assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    api = template.resources["Api"]["Properties"]
    assert "CacheClusterEnabled" not in api
    assert all("CachingEnabled" not in setting for setting in api["MethodSettings"])
