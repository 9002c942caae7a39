// usher-connector: check usher's waiting-room passes in a Node site.
// README.md shows the use; connectors/README.md states the protocol.

import { NodeGate } from "./lib/node.js";

export { Gate } from "./lib/gate.js";
export { NodeGate } from "./lib/node.js";
export { KeySet } from "./lib/keys.js";
export { UsherError } from "./lib/client.js";
export {
  EXPIRED, INVALID, MAX_TOKEN_BYTES, VALID, WRONG_ROOM, keysFromJwks, renewalDue, verifyPass,
} from "./lib/pass.js";

/**
 * createGate returns the gate for one usher auth.
 * @param {object} options
 * @param {string} options.url usher auth's address, as the site reaches it
 *   (http://127.0.0.1:8092).
 * @param {string | ((req) => string)} options.room the room of a request.
 * @returns {NodeGate}
 */
export function createGate(options) {
  return new NodeGate(options);
}
