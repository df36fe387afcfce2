"""Break on purpose what each suite guards, and check that the suite notices.

    python -m scripts.mutants [NAME ...]      (make mutants)

Each mutant edits one file, runs the tests that should catch it, and puts the
file back. A mutant counts as caught only when a test fails on what it
checks; a mutant the tests do not catch, or that only breaks their
collection, an import or a fixture, is reported, and the run fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scripts.mutant_verdict import verdict

ROOT = Path(__file__).resolve().parent.parent
STORE = "layers/core/idblocks_core/dal/counter_store.py"
DYNAMODB = "layers/core/idblocks_core/dal/dynamodb.py"
NEXT_CACHE = "layers/core/idblocks_core/logic/next_cache.py"
ALLOCATION = "layers/core/idblocks_core/logic/allocation.py"
SAR = "scripts/sar_template.py"
CALLERS_TEMPLATE = "tests/infra/test_callers_template.py"
# Each function's own Timeout, and the comment before batch's and admin's.
TIMEOUT = "      Timeout: !Ref FunctionTimeout\n"
AS_NEXT = "      # What the parameters set: as NextFunction's, which says why it is here.\n"


@dataclass(frozen=True)
class Mutant:
    name: str
    why: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


RECORDS = "client/idblocks/records.py"
RECOVERY = "client/idblocks/recovery.py"
RECOVERY_TESTS = "tests/unit/test_recovery.py"
RECORDS_TESTS = "tests/unit/test_recovery_records.py"

MUTANTS = [
    Mutant(
        "read-then-write",
        "allocation reads the high-water mark, then writes old + n: right alone, wrong under concurrency",
        STORE,
        '''            update = f"ADD #hwm :span, #room :minus_span SET {_ALLOCATED}"''',
        '''            update = f"SET #hwm = :new_hwm, {_ALLOCATED} ADD #room :minus_span"''',
        ("tests/proof/test_proof_concurrency.py",),
    ),
    Mutant(
        "read-then-write-values",
        "(its companion: the read, and the value the read-then-write mutant writes)",
        STORE,
        """            values |= {":span": _n(span), ":minus_span": _n(-span)}""",
        """            seen = self._call("get_item", Key={"name": _s(name)}, ConsistentRead=True)
            seen = seen.get("Item", {})
            import time as _t; _t.sleep(0.005)  # noqa: E702 - widen the window as a busy Lambda would
            base = int(seen["hwm"]["N"]) if seen else 0
            values |= {":span": _n(span), ":new_hwm": _n(base + span), ":minus_span": _n(-span)}""",
        (),
    ),
    Mutant(
        "no-token-recovery",
        "a resent write that finds its own token takes a new block instead of returning its own",
        STORE,
        """                return Block(
                    hwm - taken + step, hwm, replayed=True, step=step, token=found, cache=_cache_of(item)
                )""",
        "                raise StaleToken",
        (
            "tests/proof/test_proof_faults.py::test_lost_dynamodb_answers_cost_nothing_without_a_key",
            "tests/proof/test_proof_faults.py::test_keyed_requests_lose_nothing_and_repeat_nothing",
        ),
    ),
    Mutant(
        "next-cache-unlocked",
        "threads of one environment serve the cached block without its lock: two can get the same ID",
        NEXT_CACHE,
        """        with self._locks[hash(name) % _LOCK_STRIPES]:
            # Read after the lock""",
        """        if True:
            # Read after the lock""",
        ("tests/unit/test_next_cache.py::test_threads_never_get_the_same_id",),
    ),
    Mutant(
        "next-cache-no-shrink",
        "near max a cached block is refused whole: the IDs left below max are never handed out",
        NEXT_CACHE,
        "                count = refused.left",
        "                raise",
        (
            "tests/unit/test_next_cache.py::test_near_max_the_block_shrinks_so_every_id_is_handed_out",
            "tests/unit/test_cached_next.py::test_near_max_the_block_shrinks_so_all_ten_ids_are_handed_out",
        ),
    ),
    Mutant(
        "next-cache-whole-cache",
        "an environment takes the counter's whole cache setting every time, whatever it serves",
        NEXT_CACHE,
        "        if held is None:\n            return 1\n",
        "        if held is not None and held.cache is not None:\n            return held.cache\n"
        "        if held is None:\n            return 1_000_000\n",
        (
            "tests/unit/test_next_cache.py::test_six_calls_a_quarter_second_apart_take_a_few_ids_not_the_cache",
            "tests/integration/test_cached_next_devserver.py"
            "::test_six_calls_a_quarter_second_apart_move_a_counter_with_cache_1000_by_at_most_106",
        ),
    ),
    Mutant(
        "next-cache-above-the-setting",
        "a cached next's write takes what the environment asks, whatever the counter's cache setting",
        STORE,
        '''            condition += " AND #span >= :span"''',
        '''            condition += " AND (#span >= :span OR #span < :span)"''',
        ("tests/unit/test_cached_next.py::test_a_put_of_cache_governs_the_next_block",),
    ),
    Mutant(
        "next-cache-kept-whatever-was-written",
        "an expired block is served on though another environment or an admin wrote to the counter since",
        STORE,
        '''AND #token = :token AND #hwm = :end"''',
        '''AND (#token = :token OR #hwm = :end OR #hwm <> :end)"''',
        (
            "tests/unit/test_cached_next.py::test_after_another_environments_write_an_expired_block_is_dropped",
            "tests/unit/test_cached_next.py::test_after_an_admin_put_an_expired_block_is_dropped_even_if_nothing_changed",
            "tests/proof/test_proof_cached_next.py",
        ),
    ),
    Mutant(
        "next-cache-kept-for-good",
        "a block kept once is served past the bound, so a PUT or DELETE after it goes unseen",
        NEXT_CACHE,
        "        held.expires_at = asked_at + self._lifetime",
        '        held.expires_at = float("inf")',
        (
            "tests/unit/test_next_cache.py::test_an_admin_change_is_seen_within_a_lifetime_after_a_block_was_kept",
            "tests/unit/test_cached_next.py::test_a_put_after_a_block_was_kept_is_seen_within_a_minute",
        ),
    ),
    Mutant(
        "next-cache-retry-read-as-its-own-size",
        "a keyed retry asking another size reads its first attempt's write as a block of its own size",
        STORE,
        "        taken = _span_of_cached_write(found, token, step) if cached_next else",
        "        taken = (span if _span_of_cached_write(found, token, step) else None) if cached_next else",
        (
            "tests/unit/test_cached_next.py::"
            "test_a_keyed_retry_that_finds_its_block_written_elsewhere_serves_only_its_own_id",
        ),
    ),
    Mutant(
        "next-cache-kept-across-fork",
        "a forked child keeps its parent's cached block and hands out the same IDs",
        NEXT_CACHE,
        "os.register_at_fork(after_in_child=forget_all_cached_blocks)",
        "_ = forget_all_cached_blocks",
        ("tests/unit/test_next_cache.py::test_a_forked_child_does_not_serve_its_parents_block",),
    ),
    Mutant(
        "next-cache-keyed-replay-held",
        "a keyed retry finding its first attempt's block holds all of it, which another environment may hold",
        "layers/core/idblocks_core/logic/allocation.py",
        "        if block.replayed and token is not None and block.count > 1:",
        "        if False:",
        (
            "tests/unit/test_cached_next.py::"
            "test_a_keyed_retry_that_finds_its_block_written_elsewhere_serves_only_its_own_id",
        ),
    ),
    Mutant(
        "admin-write-keeps-token",
        "PUT leaves the last allocation's token on the counter: a key reused after expiry gets the old block",
        STORE,
        """UpdateExpression=f"SET {', '.join(sets)} {_FORGET_ALLOCATION}",""",
        """UpdateExpression=f"SET {', '.join(sets)}",""",
        ("tests/unit/test_replay.py::test_reused_key_after_an_admin_put_takes_a_new_block",),
    ),
    Mutant(
        "moved-back-unchecked",
        "an allocation takes from a counter behind what this environment took: a restore hands IDs out again",
        STORE,
        "        if taken_up_to is not None:\n            values[",
        "        if False:\n            values[",
        (
            "tests/unit/test_counter_moved_back.py::"
            "test_batch_from_a_counter_put_back_to_an_earlier_copy_is_refused_and_hands_out_nothing",
            "tests/integration/test_counter_moved_back_devserver.py",
        ),
    ),
    Mutant(
        "moved-back-mark-not-raised-by-cached-next",
        "a block taken for cached next does not raise the environment's mark: its move back goes unseen",
        ALLOCATION,
        "                if not block.replayed:  # a replay repeats an earlier request's block",
        "                if not block.replayed and not cached_next:",
        (
            "tests/unit/test_counter_moved_back.py::"
            "test_a_block_taken_for_cached_next_from_a_counter_put_back_is_refused",
            "tests/unit/test_counter_moved_back.py::"
            "test_a_held_block_dropped_after_the_counter_was_lowered_is_followed_by_a_refusal",
        ),
    ),
    Mutant(
        "moved-back-refused-after-the-write",
        "the move back is found after the write took its block: the write's token stays, and a retry of "
        "the key is answered the refused block",
        STORE,
        """            block = self._taken(response["Attributes"], span, written)""",
        """            block = self._taken(response["Attributes"], span, written)
            if taken_up_to is not None and block.start <= taken_up_to:
                raise CounterMovedBack(name, block.start, block.end, taken_up_to)""",
        (
            "tests/unit/test_counter_moved_back.py::"
            "test_a_keyed_batch_refused_never_gets_the_refused_block_on_retry",
        ),
    ),
    Mutant(
        "moved-back-refused-after-the-write-unconditioned",
        "(its companion: the write no longer carries the mark)",
        STORE,
        "        if taken_up_to is not None:\n            values[",
        "        if False:\n            values[",
        (),
    ),
    Mutant(
        "moved-back-mark-lowered",
        "a write answered after a later one sets the mark to its own, lower, end",
        "layers/core/idblocks_core/logic/taken_marks.py",
        "            marks[name] = last_id if mark is None or last_id > mark else mark",
        "            marks[name] = last_id",
        (
            "tests/unit/test_counter_moved_back.py::"
            "test_writes_answered_out_of_order_neither_refuse_each_other_nor_lower_the_mark",
        ),
    ),
    Mutant(
        "moved-back-marks-kept-across-restore",
        "copies restored from one SnapStart snapshot keep the marks of what the snapshot's memory took",
        "layers/core/idblocks_core/core.py",
        "    forget_all_taken_marks()\n",
        "",
        ("tests/unit/test_counter_moved_back.py::test_a_snapstart_restore_empties_the_marks",),
    ),
    Mutant(
        "backoff-past-deadline",
        "the store sleeps a backoff whatever time the invocation has left",
        DYNAMODB,
        "            if left is not None and left - delay < _SHORTEST_ATTEMPT_SECONDS:",
        "            if False:",
        ("tests/integration/test_deadline.py::test_the_store_gives_up_before_the_cutoff",),
    ),
    Mutant(
        "move-back",
        "PUT may move a counter back",
        STORE,
        '            condition += " AND #hwm <= :hwm AND #max >= :hwm"',
        '            condition += " AND #max >= :hwm"',
        (
            "tests/proof/test_proof_admin_safety.py",
            "tests/proof/test_proof_core_properties.py::TestCounterMachine",
        ),
    ),
    Mutant(
        "revive-below-mark",
        "a deleted counter may come back below its high-water mark (both checks of it removed)",
        "layers/core/idblocks_core/logic/admin.py",
        "            if first is not None and first <= hwm:",
        "            if False:",
        ("tests/unit/test_admin_routes.py", "tests/proof/test_proof_core_properties.py"),
    ),
    Mutant(
        "revive-below-mark-store",
        "(its companion: the store's own check)",
        STORE,
        "        if first_id <= seen_hwm:",
        "        if False:",
        (),
    ),
    Mutant(
        "bad-json-is-500",
        "unparseable JSON is answered as a server error",
        "layers/core/idblocks_core/api/gateway.py",
        'raise InvalidInput("invalid_json", "request body is not valid JSON") from None',
        'raise RuntimeError("request body is not valid JSON") from None',
        ("tests/proof/test_proof_fuzz.py",),
    ),
    Mutant(
        "extra-fields-accepted",
        "unknown body fields are silently ignored",
        "layers/core/idblocks_core/api/gateway.py",
        "unknown = next((key for key in data if key not in declared), None)",
        "unknown = None",
        ("tests/unit/test_allocation_routes.py", "tests/unit/test_admin_routes.py"),
    ),
    Mutant(
        "duplicate-keys-accepted",
        "a body key given twice is read as its last value",
        "layers/core/idblocks_core/api/gateway.py",
        "    if len(data) < len(pairs):",
        "    if False:",
        ("tests/unit/test_api_edge.py",),
    ),
    Mutant(
        "idempotency-across-callers",
        "idempotency records are not keyed by caller",
        "layers/core/idblocks_core/dal/idempotency.py",
        'RECORD_KEY = "[caller, counter, key]"',
        'RECORD_KEY = "[counter, key]"',
        ("tests/unit/test_idempotency.py",),
    ),
    Mutant(
        "admin-without-iam",
        "an admin route opens to callers without IAM",
        "template.yaml",
        """            Path: /admin/counters/{name}
            Method: delete
            Auth:
              Authorizer: AWS_IAM""",
        """            Path: /admin/counters/{name}
            Method: delete
            Auth:
              Authorizer: NONE""",
        ("tests/infra/test_template.py",),
    ),
    Mutant(
        "policy-wildcard",
        "the admin function may act on any table",
        "template.yaml",
        """                - dynamodb:Scan
              Resource: !If
                - CreatesCountersTable
                - !GetAtt CountersTable.Arn
""",
        """                - dynamodb:Scan
              Resource: !If
                - CreatesCountersTable
                - "*"
""",
        ("tests/infra/test_template.py",),
    ),
    Mutant(
        "counters-writable-by-put-item",
        "the counters table's policy leaves PutItem out: an administrator's put-item resets a counter",
        "template.yaml",
        "              Action:\n                - dynamodb:PutItem\n                - dynamodb:UpdateItem\n",
        "              Action:\n                - dynamodb:UpdateItem\n",
        (
            "tests/infra/test_counters_table_policy.py"
            "::test_only_the_stacks_functions_may_write_a_counter_an_administrator_included",
        ),
    ),
    Mutant(
        "counters-writable-by-any-role",
        "the counters table's policy lets every role of the account write, not the stack's functions' only",
        "template.yaml",
        'role/idblocks/${AWS::Region}/${AWS::StackName}/*"\n',
        'role/*"\n',
        (
            "tests/infra/test_counters_table_policy.py"
            "::test_only_the_stacks_functions_may_write_a_counter_an_administrator_included",
        ),
    ),
    Mutant(
        "functions-outside-the-path",
        "the functions' roles are made outside the path the counters table's policy lets write",
        "template.yaml",
        '    RolePath: !Sub "/idblocks/${AWS::Region}/${AWS::StackName}/"\n',
        "",
        (
            "tests/infra/test_counters_table_policy.py"
            "::test_only_the_stacks_functions_may_write_a_counter_an_administrator_included",
        ),
    ),
    Mutant(
        "output-policy-drifts",
        "the policy output for an existing table leaves TTL out, where the created table's denies it",
        "template.yaml",
        '"dynamodb:WriteDataForReplication",\n        "dynamodb:UpdateTimeToLive"]',
        '"dynamodb:WriteDataForReplication"]',
        (
            "tests/infra/test_counters_table_policy.py"
            "::test_a_stack_on_an_existing_table_outputs_the_policy_a_created_table_gets",
        ),
    ),
    Mutant(
        "existing-table-still-created",
        "with ExistingCountersTable the stack still creates an empty counters table",
        "template.yaml",
        "    Condition: CreatesCountersTable\n    DeletionPolicy: Retain\n",
        "    DeletionPolicy: Retain\n",
        (
            "tests/infra/test_existing_counters_table.py"
            "::test_with_an_existing_table_the_stack_creates_none_and_everything_uses_it",
        ),
    ),
    Mutant(
        "metrics-under-one-service",
        "every stack's functions emit under the service idblocks: two stacks add to one metric",
        "template.yaml",
        "        POWERTOOLS_SERVICE_NAME: !Ref AWS::StackName\n",
        "        POWERTOOLS_SERVICE_NAME: idblocks\n",
        ("tests/infra/test_stack_metrics.py::test_each_stacks_functions_emit_under_the_stacks_name",),
    ),
    Mutant(
        "alarm-reads-one-service",
        "the running-low alarm reads the service idblocks in every stack: another stack's counter fires it",
        "template.yaml",
        "                # The stack's name: the service its functions emit as (Globals).\n"
        "                - Name: service\n                  Value: !Ref AWS::StackName\n",
        "                - Name: service\n                  Value: idblocks\n",
        (
            "tests/infra/test_stack_metrics.py"
            "::test_no_alarm_or_widget_of_one_stack_reads_a_metric_the_other_emits",
        ),
    ),
    Mutant(
        "organization-takes-own-account",
        "the Organization's allow lets every principal of the stack's own account call next, policy or not",
        "template.yaml",
        """                      aws:PrincipalOrgID: !Ref CallerOrganizationId
                    StringNotEquals:
                      aws:PrincipalAccount: !Ref AWS::AccountId""",
        """                      aws:PrincipalOrgID: !Ref CallerOrganizationId""",
        (
            CALLERS_TEMPLATE
            + "::test_a_role_of_the_stacks_account_with_no_policy_may_call_nothing_though_it_is_named",
        ),
    ),
    Mutant(
        "listed-accounts-take-own-account",
        "CallerAccounts listing the stack's own account lets its every principal call next",
        "template.yaml",
        """                      aws:PrincipalAccount: !Split [",", !Ref CallerAccounts]
                    StringNotEquals:
                      aws:PrincipalAccount: !Ref AWS::AccountId""",
        """                      aws:PrincipalAccount: !Split [",", !Ref CallerAccounts]""",
        (
            CALLERS_TEMPLATE
            + "::test_a_role_of_the_stacks_account_with_no_policy_may_call_nothing_though_it_is_named",
        ),
    ),
    Mutant(
        "other-accounts-every-counter",
        "the resource policy lets other accounts take IDs of every counter, whatever ClientCounters says",
        "template.yaml",
        """                - Sid: OrganizationTakesIds
                  Effect: Allow
                  Principal: "*"
                  Action: execute-api:Invoke
                  Resource:
                    - !Sub "execute-api:/${StageName}/POST/counters/${ClientCounters}/next\"""",
        """                - Sid: OrganizationTakesIds
                  Effect: Allow
                  Principal: "*"
                  Action: execute-api:Invoke
                  Resource:
                    - !Sub "execute-api:/${StageName}/POST/counters/*/next\"""",
        (CALLERS_TEMPLATE + "::test_callers_in_other_accounts_take_only_the_counters_client_counters_names",),
    ),
    Mutant(
        "no-admin-deny-for-other-accounts",
        "the admin routes are kept from other accounts only by no statement allowing them",
        "template.yaml",
        """              - Sid: AdminOnlyFromThisAccount
                Effect: Deny""",
        """              - Sid: AdminOnlyFromThisAccount
                Effect: Allow""",
        (
            CALLERS_TEMPLATE
            + "::test_a_role_of_another_account_may_call_no_admin_route_and_is_denied_explicitly",
        ),
    ),
    Mutant(
        "private-any-endpoint",
        "a private API takes requests through any VPC endpoint",
        "template.yaml",
        """                    StringNotEquals:
                      aws:SourceVpce: !Split [",", !Ref VpcEndpointIds]""",
        """                    StringEquals:
                      aws:SourceVpce: "vpce-00000000\"""",
        (CALLERS_TEMPLATE + "::test_a_private_api_refuses_a_request_through_an_endpoint_it_does_not_list",),
    ),
    Mutant(
        "dev-server-either-across-accounts",
        "the dev server lets another account's caller in when either policy allows, not both",
        "devserver/policy.py",
        "        allowed = identity.allowed and resource_allows",
        "        allowed = identity.allowed or resource_allows",
        (
            "tests/unit/test_devserver_policy.py::test_iam_auth_takes_either_policy_in_the_same_account_and_both_from_another",
            "tests/integration/test_devserver_policy_oracle.py::test_the_stacks_resource_policies_decide_alike_for_every_caller",
        ),
    ),
    Mutant(
        "dev-server-absent-key-matches",
        "a condition key the request lacks matches: a private API takes requests through no endpoint",
        "devserver/policy.py",
        """        if given is None:
            return negated""",
        """        if given is None:
            return not negated""",
        ("tests/unit/test_devserver_policy.py::test_a_condition_holds_as_iam_evaluates_it",),
    ),
    Mutant(
        "dev-server-own-key-unchecked",
        "the dev server's own credentials skip the API's resource policy",
        "devserver/gateway.py",
        """            who = self.identities.get(key.access_key) or self._own()
            self._authorize(who, method, received.path)""",
        """            who = self.identities.get(key.access_key) or self._own()
            if who.policy is not None:
                self._authorize(who, method, received.path)""",
        (
            "tests/e2e/test_least_privilege.py::test_a_private_api_refuses_a_request_through_an_endpoint_it_does_not_list",
        ),
    ),
    Mutant(
        "client-no-region-from-private-host",
        "the client finds no region in a private API's endpoint-specific host name",
        "client/idblocks/auth.py",
        "(?:-vpce-[0-9a-f]+)?\\.execute-api",
        "\\.execute-api",
        ("tests/unit/test_client_http.py::test_iam_auth_signs_a_private_apis_url_for_its_region_and_host",),
    ),
    Mutant(
        "no-pitr",
        "point-in-time recovery off on the counters table (checkov CKV_AWS_28)",
        "template.yaml",
        """      PointInTimeRecoverySpecification:
        PointInTimeRecoveryEnabled: true
      SSESpecification:
        SSEEnabled: true
      DeletionProtectionEnabled""",
        """      SSESpecification:
        SSEEnabled: true
      DeletionProtectionEnabled""",
        ("make:security", "tests/infra/test_security.py", "tests/infra/test_template.py"),
    ),
    Mutant(
        "client-new-key-per-attempt",
        "the client asks again for a block with a new Idempotency-Key",
        "client/idblocks/sequence.py",
        "            request = self._pending\n            if request is None:",
        "            request = None\n            if request is None:",
        (
            "tests/unit/test_client_sequence.py::test_a_lost_response_does_not_burn_the_block",
            "tests/unit/test_client_sequence_faults.py::test_lost_responses_lose_no_ids_while_block_sizes_adapt",
        ),
    ),
    Mutant(
        "async-caller-owns-request",
        "an AsyncSequence caller awaits the block request itself: its cancellation cancels the request",
        "client/idblocks/async_sequence.py",
        "                await woken\n",
        "                await self._request_task\n",
        (
            "tests/unit/test_client_async_sequence.py::test_a_caller_cancelled_while_its_request_is_on_the_network_loses_nothing",
            "tests/unit/test_client_async_sequence.py::test_stress_200_tasks_mixing_next_id_and_take_with_cancellations_and_faults",
        ),
    ),
    Mutant(
        "async-new-key-per-attempt",
        "AsyncSequence asks again for a block with a new Idempotency-Key",
        "client/idblocks/async_sequence.py",
        "        request = self._pending or self._new_request(need)\n",
        "        request = self._new_request(need)\n",
        (
            "tests/unit/test_client_async_sequence.py::test_callers_cancelled_at_random_points_under_faults_lose_and_repeat_nothing",
            "tests/unit/test_client_async_sequence.py::test_stress_200_tasks_mixing_next_id_and_take_with_cancellations_and_faults",
        ),
    ),
    Mutant(
        "client-take-races",
        "take() carves IDs while next_id may still draw from the same segment",
        "client/idblocks/holding.py",
        "            self._ids = _EXHAUSTED\n            current = self._left_in_segment()",
        "            current = self._left_in_segment()",
        ("tests/unit/test_client_sequence.py::test_take_never_hands_out_what_a_concurrent_next_id_gets",),
    ),
    Mutant(
        "client-take-counts-before-emptying",
        "take() puts the segment back for next_id() before it counts what it passes over: an ID drawn"
        " in between is counted both handed out and unused",
        "client/idblocks/holding.py",
        """            big = next((i for i, block in enumerate(self._ready) if len(block) >= n), None)
            if big is None:
                self._activate(current)  # not enough: the others draw on meanwhile
                return None""",
        """            self._activate(current)
            big = next((i for i, block in enumerate(self._ready) if len(block) >= n), None)
            if big is None:
                return None""",
        (
            "tests/unit/test_client_accounting.py::test_take_passing_ids_over_counts_none_a_racing_next_id_drew",
            "tests/unit/test_client_accounting.py"
            "::test_handed_out_and_unused_add_up_to_what_was_given_under_racing_threads",
        ),
    ),
    Mutant(
        "client-restore-counts-before-emptying",
        "a restore counts what it drops while next_id() may still draw from it",
        "client/idblocks/policy.py",
        "        dropped, refused = self._freeze(), self._refused\n",
        "        dropped, refused = self._held() + self._skipped, self._refused\n",
        (
            "tests/unit/test_client_accounting.py"
            "::test_a_restore_counts_what_it_drops_once_however_threads_draw_meanwhile",
        ),
    ),
    Mutant(
        "client-moved-back-handed-out",
        "a Sequence hands out a block that overlaps IDs it was given before (the counter moved back)",
        "client/idblocks/policy.py",
        "            moved_back = self._moved_back(outcome)\n",
        "            moved_back = None\n",
        (
            "tests/unit/test_client_moved_back.py"
            "::test_a_block_overlapping_ids_given_before_is_refused_and_the_caller_told",
            "tests/unit/test_client_moved_back.py::test_an_async_sequence_refuses_the_block_and_tells_its_callers",
        ),
    ),
    Mutant(
        "client-moved-back-untold",
        "a counter that moved back, found by a prefetch, is told to no caller",
        "client/idblocks/policy.py",
        "            self._untold = error\n",
        "            pass\n",
        (
            "tests/unit/test_client_moved_back.py"
            "::test_a_prefetched_block_that_overlaps_is_told_before_any_later_block_is_fetched",
        ),
    ),
    Mutant(
        "client-moved-back-untold-after-timeout",
        "a counter that moved back, answered after its caller stopped waiting, is told to no caller",
        "client/idblocks/sequence.py",
        "            seq._unheard(exc)  # else to the next caller: this one may have stopped waiting\n",
        "",
        (
            "tests/unit/test_client_moved_back.py"
            "::test_a_block_that_overlaps_answered_after_its_caller_stopped_waiting_is_told_to_the_next",
        ),
    ),
    Mutant(
        "client-moved-back-retried",
        "the service's 500 counter_moved_back is retried like any 500 to a keyed request",
        "client/idblocks/exchange.py",
        " and code != COUNTER_MOVED_BACK:",
        ":",
        (
            "tests/unit/test_client_moved_back.py::test_the_services_counter_moved_back_is_raised_at_once_never_retried",
        ),
    ),
    Mutant(
        "client-take-hint-past-start-bound",
        "after take(n) a young Sequence asks for n past the start bound: it skips more than it used",
        "client/idblocks/policy.py",
        "        hint = self.sizer.within_start_bound(min(self._take_hint, self.sizer.maximum), held)\n",
        "        hint = min(self._take_hint, self.sizer.maximum)\n",
        (
            "tests/unit/test_client_gaps.py::test_one_id_and_a_take_then_close_skip_at_most_what_was_used",
            "tests/unit/test_client_gaps.py::test_next_id_take_and_prefetch_in_any_order_skip_at_most_what_was_used",
        ),
    ),
    Mutant(
        "client-lost-wakeup",
        "a block request that ends wakes none of the threads waiting for it",
        "client/idblocks/sequence.py",
        "            self._answers += 1\n            self._changed.notify_all()\n",
        "            self._answers += 1\n",
        (
            "tests/unit/test_client_sequence_faults.py::test_every_waiting_thread_gets_an_error_retrying_cannot_fix",
        ),
    ),
    Mutant(
        "client-fork-keeps-blocks",
        "a forked child keeps the blocks, and the pending request, of its parent",
        "client/idblocks/sequence.py",
        "        closed = self._closed\n        self._reset()\n        self._closed = closed",
        "        return",
        (
            "tests/integration/test_client_fork.py::test_a_forked_child_never_hands_out_its_parents_ids_and_does_not_stall",
        ),
    ),
    Mutant(
        "client-restore-keeps-blocks",
        "after a SnapStart restore a Sequence keeps the snapshot's blocks and pending request",
        "client/idblocks/policy.py",
        "        self._start_afresh()\n        self._unused(dropped)\n",
        "        return\n",
        (
            "tests/unit/test_client_snapstart.py::test_a_sequence_hands_out_nothing_it_held_before_a_restore",
            "tests/integration/test_client_snapstart_restore.py::test_two_environments_restored_from_one_snapshot_draw_disjoint_ids",
        ),
    ),
    Mutant(
        "client-restore-takes-abandoned",
        "a thread on the network at a SnapStart restore lands the snapshot's answer in the restored copy",
        "client/idblocks/sequence.py",
        "            if self._pending is not request:\n                return",
        "            if False:\n                return",
        (
            "tests/unit/test_client_snapstart.py::test_a_block_request_on_the_network_at_a_restore_is_abandoned",
        ),
    ),
    Mutant(
        "client-restore-leaves-waiters",
        "a thread waiting on a request abandoned at a SnapStart restore is not told, and waits on",
        "client/idblocks/sequence.py",
        "            seq._changed.notify_all()",
        "            pass",
        (
            "tests/unit/test_client_snapstart.py::test_a_thread_waiting_on_the_abandoned_request_asks_afresh_at_once",
        ),
    ),
    Mutant(
        "client-restore-leaves-tasks",
        "a task waiting on a request abandoned at a SnapStart restore is not woken, and waits on",
        "client/idblocks/async_sequence.py",
        "        with contextlib.suppress(RuntimeError):\n            seq._wake(everyone=True)\n",
        "",
        (
            "tests/unit/test_client_snapstart.py::test_a_task_waiting_on_the_abandoned_request_asks_afresh_at_once",
        ),
    ),
    Mutant(
        "client-restore-resends-key",
        "a request begun before a SnapStart restore is retried after it, with its key",
        "client/idblocks/snapstart.py",
        "    return restores != begun\n",
        "    return False\n",
        (
            "tests/unit/test_client_snapstart.py::test_an_http_request_begun_before_a_restore_is_not_retried_after_it",
        ),
    ),
    Mutant(
        "client-restore-checked-before-signing",
        "HttpBackend checks for a restore only before signing: a thread signing across one sends",
        "client/idblocks/backend.py",
        "        snapstart.check_not_restored_since()\n        super().request(*args, **kwargs)\n",
        "        super().request(*args, **kwargs)\n",
        (
            "tests/unit/test_client_snapstart.py::test_a_thread_whose_request_waits_at_a_restore_sends_nothing_after_it",
        ),
    ),
    Mutant(
        "client-restore-checked-after-signing",
        "HttpBackend checks for a restore once signed: a thread resolving a name across one sends",
        "client/idblocks/backend.py",
        "            # What the connection checks before it writes (_RestoreChecked).\n",
        "            snapstart.check_not_restored_since(attempt.begun)\n",
        (
            "tests/unit/test_client_snapstart.py::test_a_thread_whose_request_waits_at_a_restore_sends_nothing_after_it",
        ),
    ),
    Mutant(
        "client-restore-checked-after-signing-not-in-connection",
        "(its companion: the connection's check goes)",
        "client/idblocks/backend.py",
        "        snapstart.check_not_restored_since()\n        super().request(*args, **kwargs)\n",
        "        super().request(*args, **kwargs)\n",
        (),
    ),
    Mutant(
        "client-async-restore-checked-before-signing",
        "AsyncHttpBackend checks for a restore only before signing: each copy sends what it signed",
        "client/idblocks/async_backend.py",
        '                extensions={"trace": _RestoreCheck(attempt.begun)},\n',
        "",
        (
            "tests/integration/test_client_snapstart_restore.py::test_a_request_waiting_to_be_signed_or_resolved_at_the_snapshot_sends_nothing_after_it",
        ),
    ),
    Mutant(
        "client-async-restore-checked-after-signing",
        "AsyncHttpBackend checks for a restore once signed: each copy sends what it resolved across one",
        "client/idblocks/async_backend.py",
        "        try:\n            response = await self._http().request(\n",
        "        try:\n            snapstart.check_not_restored_since(attempt.begun)\n"
        "            response = await self._http().request(\n",
        (
            "tests/integration/test_client_snapstart_restore.py::test_a_request_waiting_to_be_signed_or_resolved_at_the_snapshot_sends_nothing_after_it",
        ),
    ),
    Mutant(
        "client-async-restore-checked-after-signing-no-trace",
        "(its companion: the check in httpx goes)",
        "client/idblocks/async_backend.py",
        '                extensions={"trace": _RestoreCheck(attempt.begun)},\n',
        "",
        (),
    ),
    Mutant(
        "client-restore-key-drawn-before",
        "a Sequence's request counts as begun when it is sent, not when its key was drawn",
        "client/idblocks/sequence.py",
        "                with snapstart.requests_begun_at(request.began):\n",
        "                with contextlib.nullcontext():\n",
        (
            "tests/unit/test_client_snapstart.py::test_a_sequence_request_whose_key_was_drawn_before_a_restore_is_not_sent_after_it",
        ),
    ),
    Mutant(
        "client-async-restore-key-drawn-before",
        "an AsyncSequence's request counts as begun when it is sent, not when its key was drawn",
        "client/idblocks/async_sequence.py",
        "            with snapstart.requests_begun_at(request.began):\n",
        "            with contextlib.nullcontext():\n",
        (
            "tests/unit/test_client_snapstart.py::test_an_async_sequence_request_whose_key_was_drawn_before_a_restore_is_not_sent_after_it",
        ),
    ),
    Mutant(
        "client-caller-waits-out-retries",
        "a thread sends its own block request and waits for every retry, past its wait_timeout",
        "client/idblocks/sequence.py",
        "                self._fetch_within(need, deadline)\n",
        "                self._fetch(need)\n",
        (
            "tests/unit/test_client_wait_timeout.py::test_a_thread_waits_no_longer_than_wait_timeout_for_a_service_that_never_answers",
        ),
    ),
    Mutant(
        "client-restore-same-jitter",
        "HttpBackend's retry jitter is not reseeded in a copy of the process: copies retry in step",
        "client/idblocks/backend.py",
        "        self.retry.rng.seed()\n",
        "",
        (
            "tests/integration/test_client_snapstart_restore.py::test_two_environments_restored_from_one_snapshot_draw_disjoint_ids",
        ),
    ),
    Mutant(
        "dev-state-not-saved",
        "the dev server saves its tables only on the way out",
        "devserver/server.py",
        "                if self.after_invoke is not None:\n                    self.after_invoke()",
        "                pass",
        ("tests/integration/test_devserver.py::test_state_survives_a_crash",),
    ),
    Mutant(
        "sar-keeps-language-extensions",
        "the template published to the Serverless Application Repository keeps a transform it refuses",
        SAR,
        '    template["Transform"] = SERVERLESS\n',
        '    template["Transform"] = transforms\n',
        ("tests/infra/test_sar_template.py::test_the_repository_refuses_nothing_in_the_published_template",),
    ),
    Mutant(
        "sar-keeps-the-alias",
        "the published template keeps the alias, which an update of parameters alone leaves on old settings",
        SAR,
        "    _publish_no_versions(template)\n",
        "",
        (
            "tests/infra/test_sar_template.py::test_an_update_that_changes_only_a_parameter_reaches_what_the_api_invokes",
        ),
    ),
    Mutant(
        "sar-takes-the-other-branch",
        "the published template takes the other branch of each decided Fn::If",
        SAR,
        "_decide(if_true if fixed[name] else if_false,",
        "_decide(if_false if fixed[name] else if_true,",
        ("tests/infra/test_sar_template.py::test_the_published_template_deploys_what_template_yaml_deploys",),
    ),
    Mutant(
        "timeout-in-globals",
        "FunctionTimeout back in Globals, where SAM names each version alike whatever the parameter's value",
        "template.yaml",
        "    MemorySize: 512\n",
        "    MemorySize: 512\n    Timeout: !Ref FunctionTimeout\n",
        ("tests/infra/test_versions_template.py",),
    ),
    *(
        Mutant(
            f"timeout-in-globals-{function}",
            "(its companion: the function's own Timeout goes)",
            "template.yaml",
            before + TIMEOUT,
            before,
            (),
        )
        for function, before in [
            ("next", "      # to answer (a 503) before it runs out.\n"),
            ("batch", "      CodeUri: functions/batch/\n      Handler: app.lambda_handler\n" + AS_NEXT),
            ("admin", "      CodeUri: functions/admin/\n      Handler: app.lambda_handler\n" + AS_NEXT),
        ]
    ),
    Mutant(
        "plain-http-retried",
        "https:// to a server speaking plain HTTP is retried as a network error, for seconds, with no hint",
        "client/idblocks/exchange.py",
        "            if answered_in_plain_http(outcome.error):\n",
        "            if False:\n",
        (
            "tests/unit/test_client_cannot_connect.py"
            "::test_given_https_to_a_plain_http_server_when_a_sequence_asks_then_it_is_told_at_once_to_use_http",
        ),
    ),
    Mutant(
        "signature-advice-names-the-servers-key",
        "a signature that does not match is told to sign with the dev server's own key, whoever signed it",
        "devserver/gateway.py",
        "sign with the secret key of {self._whose(refused.access_key)}",
        "sign with the secret key of {self._whose(self.credentials and self.credentials.key.access_key)}",
        (
            "tests/unit/test_devserver_sigv4.py"
            "::test_a_wrong_secret_is_told_to_sign_with_the_secret_of_the_key_it_used_and_no_secret_is_shown",
        ),
    ),
    Mutant(
        "a-secret-in-the-advice",
        "the keys the dev server names in a refusal carry their secrets",
        "devserver/gateway.py",
        """        known += [f"{access_key} ({who.name})" for access_key, who in self.identities.items()]""",
        """        known += [f"{access_key}:{who.key.secret_key} ({who.name})" """
        """for access_key, who in self.identities.items()]""",
        (
            "tests/unit/test_devserver_sigv4.py"
            "::test_a_wrong_secret_is_told_to_sign_with_the_secret_of_the_key_it_used_and_no_secret_is_shown",
        ),
    ),
    Mutant(
        "sigterm-not-handled",
        "the dev server takes SIGTERM's default: `kill` of make dev & ends it where it stands, not cleanly",
        "devserver/__main__.py",
        "    signal.signal(signal.SIGTERM, stopper.request)\n",
        "",
        (
            "tests/integration/test_devserver.py"
            "::test_make_dev_started_in_a_scripts_background_stops_as_the_development_page_says",
        ),
    ),
    Mutant(
        "not-found-without-auto-create-said",
        "next on a missing counter where AutoCreateCounters is false does not say why it was not created",
        "layers/core/idblocks_core/logic/allocation.py",
        "                    raise CounterNotFound(name, NOT_CREATED_ON_USE) from missing\n",
        "                    raise\n",
        (
            "tests/unit/test_allocation_routes.py"
            "::test_a_missing_counter_is_told_with_the_command_that_creates_it_and_the_parameter_that_would",
        ),
    ),
    Mutant(
        "recover-last-record-not-highest",
        "recover keeps each counter's last record, not its highest: a replay logged late lowers the mark",
        RECORDS,
        "        if last_id > self.highest.get(counter, 0):",
        "        if True:",
        (f"{RECORDS_TESTS}::test_the_dev_servers_records_output_gives_each_counters_highest_id",),
    ),
    Mutant(
        "recover-unreadable-record-skipped",
        "a record whose IDs cannot be read exactly is skipped as not a record: its IDs are left out",
        RECORDS,
        "        except _Unreadable as exc:\n            raise RecordsError(",
        "        except _Unreadable as exc:\n            return False\n            raise RecordsError(",
        (f"{RECORDS_TESTS}::test_a_record_that_cannot_be_read_exactly_stops_the_reading",),
    ),
    Mutant(
        "recover-insights-rounded-id",
        "an ID from Logs Insights above 2^53, maybe rounded down, is taken as it shows",
        RECORDS,
        "    if insights and number > INSIGHTS_EXACT:",
        "    if False:",
        (f"{RECORDS_TESTS}::test_an_insights_number_above_2_53_is_refused",),
    ),
    Mutant(
        "recover-partial-query-results",
        "the results of a Logs Insights query still running are taken as all there is",
        RECORDS,
        '        if status is not None and status != "Complete":',
        "        if False:",
        (f"{RECORDS_TESTS}::test_results_of_a_query_still_running_are_refused",),
    ),
    Mutant(
        "recover-missing-pages",
        "a filter-log-events file whose last page says more follow is taken as all there is",
        RECORDS,
        "        if self.events.more_follow:",
        "        if False:",
        (f"{RECORDS_TESTS}::test_a_page_that_says_more_follow_and_is_last_is_refused",),
    ),
    Mutant(
        "recover-set-at-the-mark",
        "recover sets next to the highest ID handed out, which is then handed out again",
        RECOVERY,
        '    elif handed_out < here.max:\n        steps.append(Step("set", next=handed_out + 1))',
        '    elif handed_out < here.max:\n        steps.append(Step("set", next=handed_out))',
        (f"{RECOVERY_TESTS}::test_a_live_counter_not_above_what_was_handed_out_is_set_above_it",),
    ),
    Mutant(
        "recover-next-equal-is-above",
        "a counter whose next is the highest ID handed out is left as it is",
        RECOVERY,
        "    elif here.next > handed_out:",
        "    elif here.next >= handed_out:",
        (f"{RECOVERY_TESTS}::test_a_counter_whose_next_is_the_highest_id_handed_out_is_set_above_it",),
    ),
    Mutant(
        "recover-deleted-there-left-live",
        "a counter deleted in the other table is left live here",
        RECOVERY,
        "    if other is not None and other.deleted and (here is None or not here.deleted):",
        "    if False:",
        (
            f"{RECOVERY_TESTS}::test_a_counter_deleted_in_the_other_table_is_raised_then_deleted_here",
            f"{RECOVERY_TESTS}"
            "::test_from_the_other_table_every_counter_ends_above_its_mark_and_deleted_there_stays_deleted",
        ),
    ),
    Mutant(
        "recover-dry-run-writes",
        "a dry run carries the plan out",
        RECOVERY,
        "    if not dry_run:\n        try:",
        "    if True:\n        try:",
        (f"{RECOVERY_TESTS}::test_from_the_records_every_counter_ends_above_every_id_handed_out",),
    ),
    Mutant(
        "recover-older-stack-trusted",
        "a stack that lists no deleted counters is trusted: its deleted ones look absent, and are revived",
        RECOVERY,
        '        if page.get("deleted") is not True:',
        "        if False:",
        (f"{RECOVERY_TESTS}::test_a_stack_that_lists_no_deleted_counters_is_refused_and_nothing_changes",),
    ),
    Mutant(
        "recover-table-first-page",
        "the other table is read one Scan page only: the counters past it are left out",
        "client/idblocks/counters_table.py",
        '        if "LastEvaluatedKey" not in page:\n            return counters',
        "        return counters",
        (f"{RECOVERY_TESTS}::test_the_other_table_is_read_whole_a_page_at_a_time",),
    ),
    Mutant(
        "deleted-mark-raised-unasked",
        "a PUT without deleted raises a deleted counter's kept mark: an older caller's 404 becomes a write",
        STORE,
        "                if not deleted or next_id is None or cache is not None:",
        "                if next_id is None or cache is not None:",
        (
            "tests/unit/test_admin_routes.py"
            "::test_set_on_a_deleted_counter_raises_the_mark_it_keeps_and_it_stays_deleted",
        ),
    ),
    Mutant(
        "deleted-mark-lowered",
        "PUT next on a deleted counter lowers the mark it keeps: a re-creation hands out its IDs again",
        STORE,
        '            ConditionExpression="attribute_exists(#deleted) AND #hwm <= :hwm",',
        '            ConditionExpression="attribute_exists(#deleted)",',
        (
            "tests/unit/test_admin_routes.py::test_set_below_a_deleted_counters_mark_is_409_and_changes_nothing",
        ),
    ),
]
# Mutants that only make sense together.
TOGETHER = {
    "read-then-write": ["read-then-write-values"],
    "revive-below-mark": ["revive-below-mark-store"],
    "moved-back-refused-after-the-write": ["moved-back-refused-after-the-write-unconditioned"],
    "timeout-in-globals": [f"timeout-in-globals-{function}" for function in ("next", "batch", "admin")],
    "client-restore-checked-after-signing": ["client-restore-checked-after-signing-not-in-connection"],
    "client-async-restore-checked-after-signing": ["client-async-restore-checked-after-signing-no-trace"],
}


# Generous: the proof suites run for minutes on a busy machine. A run that
# outlasts it is reported as broken, not as caught.
TARGET_TIMEOUT_SECONDS = 1800


def run(target: str) -> tuple[str, str]:
    """How the target ended with the mutant in place: ("fails", why) when a
    test failed on what it checks (the mutant is caught), ("passes", ...), or
    ("broken", why) for a collection or import error, a fixture that could
    not start, a timeout: none of these shows that a test noticed."""
    if target.startswith("make:"):
        done = subprocess.run(["make", target.split(":", 1)[1]], cwd=ROOT, capture_output=True, text=True)
        return ("fails", "make failed") if done.returncode else ("passes", "make succeeded")
    with tempfile.TemporaryDirectory() as scratch:
        record = Path(scratch) / "verdict.json"
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                   "-p", "scripts.mutant_verdict", target]  # fmt: skip
        process = subprocess.Popen(
            command, cwd=ROOT, env=os.environ | {"IDBLOCKS_MUTANT_VERDICT": str(record)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            process.wait(timeout=TARGET_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # pytest and the servers it started
            process.wait()
            return "broken", f"timed out after {TARGET_TIMEOUT_SECONDS} s"
        if not record.is_file():
            return "broken", f"pytest exit status {process.returncode} before its session ended"
        return verdict(json.loads(record.read_text()))


def main() -> None:
    wanted = set(sys.argv[1:])
    failures = []
    for mutant in MUTANTS:
        if not mutant.tests or (wanted and mutant.name not in wanted):
            continue
        group = [mutant] + [m for m in MUTANTS if m.name in TOGETHER.get(mutant.name, [])]
        originals = {}
        try:
            for part in group:
                path = ROOT / part.path
                text = originals.setdefault(path, path.read_text())
                current = path.read_text()
                if part.old not in current:
                    raise SystemExit(f"mutant {part.name}: its target is no longer in {part.path}")
                path.write_text(current.replace(part.old, part.new, 1))
            started = time.monotonic()
            results = {target: run(target) for target in mutant.tests}
        finally:
            for path, text in originals.items():
                path.write_text(text)
        outcomes = [outcome for outcome, _ in results.values()]
        status = "caught" if "fails" in outcomes else "BROKEN" if "broken" in outcomes else "NOT CAUGHT"
        print(f"{status:10} {mutant.name:28} {time.monotonic() - started:6.0f} s  {mutant.why}", flush=True)
        for target, (outcome, why) in results.items():
            print(f"{'':10}   {outcome:6} {target}  ({why})", flush=True)
        if status != "caught":
            failures.append(f"{mutant.name} ({status})")
    if failures:
        raise SystemExit(f"mutants not caught: {failures}")


if __name__ == "__main__":
    main()
