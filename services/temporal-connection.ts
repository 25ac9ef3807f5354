import { readFileSync } from 'node:fs';
import type { TLSConfig } from '@temporalio/client';
import type { TemporalSettings } from '../domain/config';

/**
 * How the API, the worker and the scripts reach Temporal: the address, and for a cluster that needs them, TLS (the
 * CA, a client certificate for mTLS, the server name) and Temporal Cloud's API key. One shape for the client's
 * Connection and the worker's NativeConnection.
 */
export function temporalConnectionOptions(t: Pick<TemporalSettings, 'address' | 'apiKey' | 'tls'>): {
  address: string;
  apiKey?: string;
  tls?: TLSConfig;
} {
  if (!t.tls) return { address: t.address, ...(t.apiKey ? { apiKey: t.apiKey } : {}) };
  const { clientCertPath, clientKeyPath, serverCaCertPath, serverName } = t.tls;
  if ((clientCertPath === undefined) !== (clientKeyPath === undefined)) {
    throw new Error('TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH are set together or not at all');
  }
  const read = (name: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new Error(`${name}=${file} cannot be read: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  return {
    address: t.address,
    ...(t.apiKey ? { apiKey: t.apiKey } : {}),
    tls: {
      ...(serverName ? { serverNameOverride: serverName } : {}),
      ...(serverCaCertPath
        ? { serverRootCACertificate: read('TEMPORAL_TLS_SERVER_CA_CERT_PATH', serverCaCertPath) }
        : {}),
      ...(clientCertPath && clientKeyPath
        ? {
            clientCertPair: {
              crt: read('TEMPORAL_TLS_CLIENT_CERT_PATH', clientCertPath),
              key: read('TEMPORAL_TLS_CLIENT_KEY_PATH', clientKeyPath),
            },
          }
        : {}),
    },
  };
}
