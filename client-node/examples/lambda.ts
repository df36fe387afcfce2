/**
 * A Lambda handler (nodejs20.x or later) that numbers orders. The Sequence is
 * built once per execution environment, outside the handler, so warm
 * invocations take IDs from memory; its blocks are the environment's own.
 */

import { HttpBackend, IamAuth, Sequence } from "@idblocks/client";

const backend = new HttpBackend(process.env["IDBLOCKS_URL"] ?? "", { auth: new IamAuth() });
const orders = new Sequence(backend, "orders", { waitTimeout: 5 });

interface OrderEvent {
  lines: string[];
}

export const handler = async (event: OrderEvent): Promise<{ orderId: number; lineIds: number[] }> => {
  const orderId = await orders.next();
  const lineIds = (await orders.take(Math.max(1, event.lines.length))).toArray();
  return { orderId, lineIds };
};
