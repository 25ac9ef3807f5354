/** The id under which react-aria looks for its style of pressable elements (buttons, options) before adding it. */
const PRESSABLE_STYLE_ID = 'react-aria-pressable-style';

/**
 * react-aria adds a <style> of its own for its pressable elements unless the page holds an element of that id, and
 * the page's policy refuses inline styles. Its one rule is in styles.css instead, and the page's stylesheet takes the
 * id, so react-aria finds it there and adds nothing.
 */
export function claimPressableStyle(): void {
  document.querySelector('link[rel="stylesheet"]')?.setAttribute('id', PRESSABLE_STYLE_ID);
}
