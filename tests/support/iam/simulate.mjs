// Reads a JSON list of requests on stdin, writes a JSON list of decisions on
// stdout, one per request: "Allowed", "ImplicitlyDenied", "ExplicitlyDenied",
// or "invalid: ..." when the simulator refuses the request or a policy
// (an action that does not exist, a resource ARN that is not the action's).
// Each request: {principal, action, resource, account, identityPolicies: [policy],
// resourcePolicy: policy|null, context: {key: value}}.
import { runSimulation } from '@cloud-copilot/iam-simulate'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const requests = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const decisions = []
for (const request of requests) {
  const result = await runSimulation(
    {
      request: {
        principal: request.principal,
        action: request.action,
        resource: { resource: request.resource, accountId: request.account },
        contextVariables: request.context ?? {},
      },
      identityPolicies: (request.identityPolicies ?? []).map((policy, i) => ({ name: `policy${i}`, policy })),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      resourcePolicy: request.resourcePolicy ?? undefined,
    },
    {},
  )
  if (result.resultType === 'single') {
    decisions.push(result.result.analysis.result)
  } else {
    decisions.push(`invalid: ${JSON.stringify(result.errors ?? result)}`)
  }
}
process.stdout.write(JSON.stringify(decisions))
