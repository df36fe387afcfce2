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

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from devserver.policy import Policy, PolicyError, gateway_decision, parse
from tests.support.iam import ANONYMOUS, Request, decide, principal_context

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
# seed (hypothesis replays it) and the cases decided otherwise. Few large
# batches: each starts the evaluator (Node) once, half a second.
BATCH = 600


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


@settings(max_examples=2, deadline=None)
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


# -- the API's resource policy too, for callers of every account ----------------------
#
# A request as API Gateway authorizes it with IAM auth and a resource policy:
# the caller's own policy (or none: an unsigned request, for a route without
# IAM auth), the API's resource policy (or none), the principal's account,
# Organization and ARN, and the VPC endpoint it came through. The evaluator
# decides a resource with a resource policy as IAM does for any service (a
# caller of the resource's account needs either policy to allow, a caller
# of another account both), which is API Gateway's rule for IAM auth; an
# unsigned request needs the resource policy's allow. An unsigned request to
# an API without a resource policy is left out: API Gateway lets it through
# (no auth, no policy), where IAM, which knows no unauthenticated calls but
# through a resource policy, would not.

ORGANIZATIONS = ["o-abcdefghij", "o-zyxwvutsrq"]
PRINCIPAL_ACCOUNTS = [*ACCOUNTS, "111122223333"]
ENDPOINTS = ["vpce-0123456789abcdef0", "vpce-11112222", "vpce-99998888"]
PRINCIPALS = ["role/orders-service", "role/orders-batch", "user/dev"]


@dataclass(frozen=True)
class Caller:
    """Who calls, and through which endpoint; None: not signed."""

    account: str | None
    organization: str | None
    name: str
    endpoint: str | None

    @property
    def arn(self) -> str:
        return f"arn:aws:iam::{self.account}:{self.name}"

    def context(self) -> dict[str, str]:
        context = {} if self.account is None else principal_context(self.arn, self.organization)
        if self.endpoint:
            context["aws:SourceVpce"] = self.endpoint
        return context


def caller(rng: random.Random) -> Caller:
    endpoint = rng.choice([*ENDPOINTS, None])
    if rng.random() < 0.15:
        return Caller(None, None, "", endpoint)
    organization = rng.choice([*ORGANIZATIONS, None])
    return Caller(rng.choice(PRINCIPAL_ACCOUNTS), organization, rng.choice(PRINCIPALS), endpoint)


def condition_value(rng: random.Random, key: str, operator: str, who: Caller) -> str:
    """A value for ``key``: mostly the caller's own or one near it."""
    arn = who.arn if who.account else f"arn:aws:iam::{rng.choice(PRINCIPAL_ACCOUNTS)}:role/orders-service"
    choices = {
        "aws:PrincipalAccount": [*PRINCIPAL_ACCOUNTS, who.account or ACCOUNTS[0]],
        "aws:PrincipalOrgID": [*ORGANIZATIONS, who.organization or ORGANIZATIONS[0]],
        "aws:SourceVpce": [*ENDPOINTS, who.endpoint or ENDPOINTS[0]],
        "aws:PrincipalArn": [arn, arn.replace("orders-service", "orders-batch")],
    }
    value = rng.choice(choices[key])
    if "Like" in operator and rng.random() < 0.5:
        value = wildcarded(rng, value)
    return value


def condition(rng: random.Random, who: Caller) -> dict:
    made: dict = {}
    for _ in range(rng.randint(1, 2)):
        key = rng.choice(["aws:PrincipalAccount", "aws:PrincipalOrgID", "aws:SourceVpce", "aws:PrincipalArn"])
        operators = ["StringEquals", "StringNotEquals", "StringLike", "StringNotLike"]
        if key == "aws:PrincipalArn":
            operators += ["ArnLike", "ArnNotLike", "ArnEquals", "ArnNotEquals"]
        operator = rng.choice(operators)
        values = [condition_value(rng, key, operator, who) for _ in range(rng.randint(1, 2))]
        made.setdefault(operator, {})[key] = values if len(values) > 1 else values[0]
    return made


def resource_statement(rng: random.Random, request: Invocation, who: Caller) -> dict:
    made = statement(rng, request)
    made["Principal"] = "*"
    if rng.random() < 0.7:
        made["Condition"] = condition(rng, who)
    return made


def cross_account_cases(rng: random.Random) -> list[tuple[dict | None, dict | None, Caller, str, Invocation]]:
    made = []
    while len(made) < CROSS_BATCH:
        request, who = target(rng), caller(rng)
        mine = None if who.account is None else generated_policy(rng, request)
        if mine is not None and rng.random() < 0.3:
            mine["Statement"][0]["Condition"] = condition(rng, who)
        theirs = None
        if rng.random() < 0.8:
            statements = [resource_statement(rng, request, who) for _ in range(rng.randint(1, 3))]
            theirs = {"Version": "2012-10-17", "Statement": statements}
        if who.account is None and theirs is None:
            continue  # open at API Gateway, not a case IAM decides (see above)
        made.append((mine, theirs, who, rng.choice(ACTIONS), request))
    return made


CROSS_BATCH = 100


def assert_same_gateway_decisions(
    batch: list[tuple[dict | None, dict | None, Caller, str, Invocation]],
    reads: list[Policy] | None = None,
) -> None:
    """Each case decided by the dev server (with its own reading of the
    resource policy, ``reads``, where given) and by the evaluator."""
    ours = []
    for index, (mine, theirs, who, action, request) in enumerate(batch):
        context = who.context()
        identity = None if mine is None else parse(mine, "generated").decide(action, request.arn, context)
        resource_policy = None if theirs is None else parse(theirs, "generated", resource=True)
        if reads is not None:
            resource_policy = reads[index]
        resource = None if resource_policy is None else resource_policy.decide(action, request.arn, context)
        ours.append(gateway_decision(identity, resource, same_account=who.account == request.account))
    evaluated = decide(
        Request(
            ANONYMOUS if who.account is None else who.arn,
            action,
            request.arn,
            request.account,
            () if mine is None else (mine,),
            theirs,
            who.context(),
        )
        for mine, theirs, who, action, request in batch
    )
    differ = [
        (case, mine, its) for case, mine, its in zip(batch, ours, evaluated, strict=True) if mine != its
    ]
    assert not differ, f"{len(differ)} of {len(batch)} decided otherwise, e.g. {differ[:2]}"


# No shrinking: a seed's neighbours make unrelated batches; a failure names its cases.
@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(st.integers(0, 2**64 - 1))
def test_callers_of_every_account_are_decided_as_the_evaluator_decides_with_the_apis_resource_policy(seed):
    """Same account and another, in the Organization or not, signed or not,
    through a listed endpoint, another or none: the caller's policy and the
    API's resource policy, with conditions on those keys, decide alike."""
    batch = cross_account_cases(random.Random(seed))
    assert_same_gateway_decisions(batch)
    # the batch covers what it is about
    assert {who.account == request.account for _, _, who, _, request in batch} == {True, False}
    assert any(who.account is None for _, _, who, _, _ in batch)
    assert any(theirs is None for _, theirs, _, _, _ in batch)


def test_the_stacks_resource_policies_decide_alike_for_every_caller():
    """The resource policies template.yaml makes (other accounts, a private
    API, unsigned callers of one), as the dev server reads them, for callers
    of every kind."""
    from devserver.identities import api_arn, resource_policy
    from localrun.template import Template

    rng = random.Random(7)
    batch, reads = [], []
    for parameters in (
        {"CallerOrganizationId": ORGANIZATIONS[0], "CallerAccounts": f"{PRINCIPAL_ACCOUNTS[2]},{ACCOUNT}"},
        {"EndpointType": "PRIVATE", "VpcEndpointIds": ",".join(ENDPOINTS[:2]), "ClientCounters": "orders*"},
        {"EndpointType": "PRIVATE", "VpcEndpointIds": ENDPOINTS[0], "ClientAuth": "NONE"},
    ):
        template = Template(parameter_overrides=parameters)
        read = resource_policy(template, api_arn(template, "us-east-1", ACCOUNT, APIS[0]))
        assert read is not None
        statements = template.resolved.template["Resources"]["Api"]["Properties"]["Auth"]["ResourcePolicy"]
        document = {
            "Version": "2012-10-17",
            "Statement": [written_out(s) for s in statements["CustomStatements"]],
        }
        for _ in range(40):
            who = caller(rng)
            request = replace(target(rng), region="us-east-1", account=ACCOUNT, api=APIS[0], stage="v1")
            mine = None if who.account is None else generated_policy(rng, request)
            batch.append((mine, document, who, "execute-api:Invoke", request))
            reads.append(read)
    assert_same_gateway_decisions(batch, reads)


def written_out(statement: dict) -> dict:
    """A statement with its shorthand ARNs ("execute-api:/...") written out
    for the API a1b2c3d4e5 of account 123456789012 in us-east-1, as API
    Gateway stores it."""
    written = dict(statement)
    api = f"arn:aws:execute-api:us-east-1:{ACCOUNT}:{APIS[0]}/"
    for key in ("Resource", "NotResource"):
        if key in written:
            values = [written[key]] if isinstance(written[key], str) else written[key]
            written[key] = [value.replace("execute-api:/", api) for value in values]
    return written
