import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

/** A TCP port that was free a moment ago on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether something accepts connections on this loopback port (a process left running, or one not yet up). */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * The kernel's range of ephemeral ports: every outgoing connection (a database client's, a fetch) takes its local
 * port from it, at any moment. A port chosen there for a server started later can be taken in between.
 */
export function ephemeralPortRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low && high) return [low, high];
  } catch {
    // Not Linux: the IANA range.
  }
  return [49152, 65535];
}

/** Whether this process can listen on the loopback port now (nothing listens there, nothing holds it). */
export function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * `count` consecutive ports below the ephemeral range, free now, for a server that binds several ports some time
 * after they are chosen (the Temporal server binds each service's port as that service starts): no outgoing
 * connection takes one meanwhile. Only another listener could, and the caller's next choice avoids what it holds.
 */
export async function freePortBlock(count: number, avoid: ReadonlySet<number> = new Set()): Promise<number> {
  const [ephemeralLow] = ephemeralPortRange();
  const low = 10_000;
  const high = Math.min(ephemeralLow, 32_768) - count;
  for (let tries = 0; tries < 200; tries++) {
    const base = low + Math.floor(Math.random() * (high - low));
    const block = Array.from({ length: count }, (_, i) => base + i);
    if (block.some((p) => avoid.has(p))) continue;
    if ((await Promise.all(block.map(canListen))).every(Boolean)) return base;
  }
  throw new Error(`no ${count} free consecutive ports between ${low} and ${high + count}`);
}
