"""The dev server's IAM evaluation (devserver/policy.py) against an IAM
policy evaluator (@cloud-copilot/iam-simulate, tests/support/iam.py): on
generated policies (Allow and Deny, Action and NotAction, Resource and
NotResource, * and ? in every part IAM takes them, case changed) and
execute-api request ARNs, with counter names of ".", "-", "_" and names
that share a beginning (orders, orders.eu, ordersXeu), the two decide the
same every time.

Each example is a batch of cases decided by one run of the evaluator (Node
starts once per batch).

One reading is left out of the generated policies, where the evaluator
departs from IAM's documentation: it takes the resource part's first
element (the API id, before the first "/") for a resource type, which takes
no wildcard, so ``arn:aws:execute-api:*:*:*/v1/POST/...`` names nothing to
it; IAM allows a wildcard in every part of an ARN but the service
(reference_policies_elements_resource), and API Gateway's own examples put
one in the API id's place. The dev server reads it as IAM documents it
(tests/unit/test_devserver_policy.py::
test_a_star_spans_slashes_across_stage_method_and_path)."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from devserver.policy import PolicyError, parse
from tests.support.iam import Request, decide

PRINCIPAL = "arn:aws:iam::123456789012:user/dev"
ACCOUNT = "123456789012"
ACTIONS = ["execute-api:Invoke", "execute-api:InvalidateCache"]
REGIONS = ["us-east-1", "eu-west-1"]
ACCOUNTS = ["123456789012", "210987654321"]
APIS = ["a1b2c3d4e5", "a1b2c3d4e6"]
STAGES = ["v1", "prod"]
METHODS = ["GET", "POST", "PUT", "DELETE"]
# Names that share beginnings, and the characters a name may hold.
NAMES = ["orders", "orders.eu", "ordersXeu", "orders-eu", "orders_eu", "Orders", "o", "team-a_1.x", "eu"]

NAME_CHARACTERS = "abcXY._-0"
ROUTES = ["counters/{}/next", "counters/{}/batch", "admin/counters", "admin/counters/{}"]
ACTION_PATTERNS = [
    "*",
    "execute-api:*",
    "execute-api:Invoke",
    "EXECUTE-API:invoke",
    "execute-api:Inv?ke",
    "execute-api:In*",
    "execute-api:*Cache",
    "execute-api:InvalidateCache",
    "s3:GetObject",
    "execute-api:Invoke?",
]
# Each example is a seed, from which a batch is made with random: composite
# strategies drawing a hundred cases per example took minutes to generate,
# and a Random of hypothesis' runs out of its buffer. A failure names its
# seed (hypothesis replays it) and the cases decided otherwise.
BATCH = 120


@dataclass(frozen=True)
class Invocation:
    """The parts of one request's ARN."""

    region: str
    account: str
    api: str
    stage: str
    method: str
    route: str  # with {} for the name
    name: str

    @property
    def arn(self) -> str:
        return (
            f"arn:aws:execute-api:{self.region}:{self.account}:{self.api}/{self.stage}/{self.method}/"
            + self.route.format(self.name)
        )


def name(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return rng.choice(NAMES)
    return "".join(rng.choice(NAME_CHARACTERS) for _ in range(rng.randint(1, 8)))


def target(rng: random.Random) -> Invocation:
    return Invocation(
        rng.choice(REGIONS),
        rng.choice(ACCOUNTS),
        rng.choice(APIS),
        rng.choice(STAGES),
        rng.choice(METHODS),
        rng.choice(ROUTES),
        name(rng),
    )


def wildcarded(rng: random.Random, text: str) -> str:
    """``text``, or with a *, ** or ? in place of a stretch of it."""
    if rng.random() < 0.5:
        return text
    start = rng.randint(0, len(text))
    end = rng.randint(start, len(text))
    return text[:start] + rng.choice(["*", "?", "**"]) + text[end:]


def near(rng: random.Random, text: str, others: list[str]) -> str:
    """``text`` as it is, another of ``others`` (a name that shares its
    beginning, a method in lower case...), or wildcarded."""
    roll = rng.random()
    if roll < 0.4:
        return text
    if roll < 0.6:
        return rng.choice(others)
    return wildcarded(rng, text)


def sibling(rng: random.Random, text: str) -> str:
    """A name one step from ``text``: another that shares its beginning
    (orders.eu for ordersXeu), or one of its characters changed to a dot,
    an X, a dash or an underscore."""
    kin = [other for other in NAMES if other[:3] == text[:3] and other != text]
    if kin and rng.random() < 0.6:
        return rng.choice(kin)
    at = rng.randrange(len(text))
    return text[:at] + rng.choice(".X-_") + text[at + 1 :]


def policy_resource(rng: random.Random, request: Invocation, *, short: bool = True) -> str:
    """A resource written about ``request``: each part kept, changed or
    wildcarded, in every part IAM takes a wildcard but the API id (the
    evaluator takes none there, see above); or the request's own ARN with
    its counter's name one step away."""
    if rng.random() < 0.2:
        return replace(request, name=sibling(rng, request.name)).arn
    if short and rng.random() < 0.1:
        return rng.choice(["*", "arn:aws:execute-api:*", "arn:aws:execute-api:eu-*", "arn:*:execute-api:*"])
    partition = near(rng, "aws", ["aws", "aws-cn", "AWS"])
    region = near(rng, request.region, [*REGIONS, "US-EAST-1"])
    account = near(rng, request.account, ACCOUNTS)
    api = near(rng, request.api, APIS).replace("?", "*")
    if "*" in api:  # from the API id on, one wildcard
        return f"arn:{partition}:execute-api:{region}:{account}:{api.partition('*')[0]}*"
    route = near(rng, request.route, [*ROUTES, "counters/{}/*", "counters/{}", "admin/counters*", "*"])
    tail = "/".join(
        [
            near(rng, request.stage, STAGES),
            near(rng, request.method, [*METHODS, "post", "Post"]),
            route.format(near(rng, request.name, NAMES)) if route.count("{}") == 1 else route,
        ]
    )
    if rng.random() < 0.2:  # cut short, a star running on
        tail = tail[: rng.randint(0, len(tail))] + "*"
    return f"arn:{partition}:execute-api:{region}:{account}:{api}/{tail}"


def one_or_list(rng: random.Random, make) -> str | list[str]:
    return make() if rng.random() < 0.5 else [make() for _ in range(rng.randint(1, 3))]


def statement(rng: random.Random, request: Invocation) -> dict:
    made: dict = {"Effect": rng.choice(["Allow", "Allow", "Deny"])}
    made["NotAction" if rng.random() < 0.2 else "Action"] = one_or_list(
        rng, lambda: rng.choice(ACTION_PATTERNS)
    )

    def about() -> Invocation:  # mostly the request's, sometimes another's
        return request if rng.random() < 0.7 else target(rng)

    if rng.random() < 0.2:
        # a NotResource is an ARN's six parts (devserver.policy says why)
        made["NotResource"] = one_or_list(rng, lambda: policy_resource(rng, about(), short=False))
    else:
        made["Resource"] = one_or_list(rng, lambda: policy_resource(rng, about()))
    if rng.random() < 0.5:
        made["Sid"] = f"S{rng.randint(0, 99)}"
    return made


def generated_policy(rng: random.Random, request: Invocation) -> dict:
    statements = [statement(rng, request) for _ in range(rng.randint(1, 3))]
    return {"Version": "2012-10-17", "Statement": statements}


def cases(rng: random.Random) -> list[tuple[dict, str, str]]:
    """Requests, each with a policy written mostly about it."""
    made = []
    for _ in range(BATCH):
        request = target(rng)
        made.append((generated_policy(rng, request), rng.choice(ACTIONS), request.arn))
    return made


def assert_same_decisions(batch: list[tuple[dict, str, str]]) -> None:
    ours = [parse(policy, "generated").decide(action, arn).result for policy, action, arn in batch]
    theirs = decide(
        Request(PRINCIPAL, action, arn, ACCOUNT, identity_policies=(policy,)) for policy, action, arn in batch
    )
    differ = [(case, mine, its) for case, mine, its in zip(batch, ours, theirs, strict=True) if mine != its]
    assert not differ, f"{len(differ)} of {len(batch)} decided otherwise, e.g. {differ[:3]}"


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_the_dev_server_decides_as_the_iam_policy_evaluator_on_generated_policies(seed):
    assert_same_decisions(cases(random.Random(seed)))


def policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def arn(name: str, method: str = "POST", route: str = "next", api: str = "a1b2c3d4e5") -> str:
    return f"arn:aws:execute-api:eu-west-1:123456789012:{api}/v1/{method}/counters/{name}/{route}"


def test_the_cases_named_in_the_task_decide_alike():
    """Shared beginnings and dots; * across /; case; Deny over Allow;
    NotAction and NotResource, each where it can go either way."""
    invoke = "execute-api:Invoke"
    cases = []
    for pattern in ("orders", "orders.eu", "ordersXeu", "orders*", "orders?eu", "orders.*", "*eu"):
        document = policy({"Effect": "Allow", "Action": invoke, "Resource": arn(pattern)})
        cases += [
            (document, invoke, arn(name)) for name in ("orders", "orders.eu", "ordersXeu", "orders.eu.x")
        ]
    across = policy(
        {"Effect": "Allow", "Action": invoke, "Resource": "arn:aws:execute-api:*:*:a1b2c3d4e5/*/next"}
    )
    cases += [
        (across, invoke, arn(n, m, r)) for n in NAMES[:3] for m in ("GET", "POST") for r in ("next", "batch")
    ]
    lower = policy({"Effect": "Allow", "Action": "EXECUTE-API:INVOKE", "Resource": arn("orders", "post")})
    cases += [(lower, invoke, arn("orders")), (lower, invoke, arn("orders", "post"))]
    deny = policy(
        {"Effect": "Allow", "Action": "execute-api:*", "Resource": "*"},
        {"Effect": "Deny", "Action": invoke, "Resource": arn("orders.eu")},
    )
    cases += [(deny, invoke, arn(n)) for n in NAMES]
    not_resource = policy({"Effect": "Allow", "Action": invoke, "NotResource": arn("orders*")})
    not_action = policy({"Effect": "Allow", "NotAction": "execute-api:InvalidateCache", "Resource": arn("*")})
    cases += [(not_resource, invoke, arn(n)) for n in NAMES]
    cases += [(not_action, a, arn("orders")) for a in ACTIONS]
    assert_same_decisions(cases)
    assert len(cases) > 60


def test_a_generated_policy_is_one_the_dev_server_takes():
    """The generator makes no policy the dev server refuses: a refusal would
    be a case not compared."""
    rng = random.Random(0)
    for _ in range(2000):
        document = generated_policy(rng, target(rng))
        try:
            parse(document, "generated")
        except PolicyError as exc:
            raise AssertionError(f"{document}: {exc}") from None
