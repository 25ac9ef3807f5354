import { Component, type ReactNode } from 'react';

/**
 * A view that fails to render (an answer of a shape it did not expect) says so in words, and the rest of the console
 * keeps working. `resetKey` (the route and agent) gives it another try.
 */
export class ViewBoundary extends Component<{ resetKey: string; children: ReactNode }, { failed: string | null }> {
  override state: { failed: string | null } = { failed: null };

  static getDerivedStateFromError(err: unknown) {
    return { failed: err instanceof Error ? err.message : String(err) };
  }

  override componentDidUpdate(previous: { resetKey: string }) {
    if (previous.resetKey !== this.props.resetKey && this.state.failed) this.setState({ failed: null });
  }

  override render() {
    if (this.state.failed)
      return (
        <p role="alert" className="alert">
          This view could not be shown: {this.state.failed}
        </p>
      );
    return this.props.children;
  }
}
