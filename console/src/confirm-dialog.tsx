import type { ReactNode } from 'react';
import { Dialog, Heading, Modal, ModalOverlay } from 'react-aria-components';

/**
 * A decision asked twice: a modal dialog (react-aria's, which traps focus, hides the page from assistive technology
 * and gives focus back when it closes) with the confirming button focused, so Enter confirms. While the request is in
 * flight its buttons are disabled and it cannot be dismissed.
 */
export function ConfirmDialog(props: {
  isOpen: boolean;
  title: string;
  confirmLabel: string;
  /** What the dialog says while the request is in flight, e.g. "Approving…". */
  pendingText: string;
  pending: boolean;
  tone: 'primary' | 'danger';
  onConfirm: () => void;
  onCancel: () => void;
  children?: ReactNode;
}) {
  const { pending } = props;
  return (
    <ModalOverlay
      className="modal-overlay"
      isOpen={props.isOpen}
      onOpenChange={(open) => !open && !pending && props.onCancel()}
      isDismissable={!pending}
      isKeyboardDismissDisabled={pending}
    >
      <Modal className="modal">
        <Dialog className="dialog">
          <Heading slot="title" level={2}>
            {props.title}
          </Heading>
          {props.children}
          <div className="actions">
            <button
              type="button"
              className={`button ${props.tone}`}
              // The dialog opens on the decision it asks about: Enter confirms, Escape or Tab and Enter cancel.
              autoFocus
              disabled={pending}
              onClick={props.onConfirm}
            >
              {props.confirmLabel}
            </button>
            <button type="button" className="button" disabled={pending} onClick={props.onCancel}>
              Cancel
            </button>
            {pending ? <span className="muted">{props.pendingText}</span> : null}
          </div>
        </Dialog>
      </Modal>
    </ModalOverlay>
  );
}
