import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import type { KeelConfig } from '../domain/config';

export interface Tracing {
  /** Temporal's OpenTelemetry plugin: client, workflow and activity interceptors, and the workflow span sink. */
  plugin: OpenTelemetryPlugin;
  /** The plugin's workflow interceptors, which a prebuilt workflow bundle must contain. */
  workflowModules: string[];
  /** Flushes the spans still buffered. */
  shutdown(): Promise<void>;
}

/**
 * OpenTelemetry tracing through @temporalio/interceptors-opentelemetry, when an OTLP endpoint is configured
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTLP over HTTP). The API's client starts a
 * trace with each workflow it starts or updates, and the worker continues it through the workflow, its activities
 * and its child workflows: one trace from a submitted message to its delivered reply.
 */
export function tracingFromConfig(config: KeelConfig, serviceName: 'keel-api' | 'keel-worker'): Tracing | undefined {
  if (!config.tracing) return undefined;
  const resource = new Resource({ 'service.name': serviceName });
  // The exporter reads the endpoint (and headers, timeouts) from the standard OTEL_* variables.
  const spanProcessor = new BatchSpanProcessor(new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register();
  return {
    plugin: new OpenTelemetryPlugin({ resource, spanProcessor }),
    workflowModules: [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')],
    shutdown: () => provider.shutdown(),
  };
}
