import type { Ref } from 'react';
import type { ConsoleConfig } from './console-config';

/** What every view is given: the agent chosen, the server's config, and its heading (focused as it opens). */
export interface ViewProps {
  agentId: string;
  config: ConsoleConfig | undefined;
  headingRef: Ref<HTMLHeadingElement>;
}
