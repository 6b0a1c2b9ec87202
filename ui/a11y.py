"""What the page tells a screen reader that Gradio's components do not (added to the page head by
`launch_kwargs`): every result thumbnail is named by its method, its rank, whether it is the
ground-truth target and its caption (Gradio names them "Thumbnail 1 of 8", and the green frame is
only seen); the examples likewise; an image shown in a button (the reference, the figure preview)
is named after what it shows. Checked with axe-core by tests/test_app_a11y.py.

A MutationObserver renames what Gradio (re-)renders, once per animation frame.
"""

A11Y_JS = """
<script>
(() => {
  const IMAGES = {'ref-preview': 'The reference image', 'fig-preview': 'The figure, as exported',
                  'result-preview-image': 'The result at full size'};
  const text = (el) => (el ? el.textContent : '').replace(/\\s+/g, ' ').trim();
  const set = (el, attr, value) => { if (value && el.getAttribute(attr) !== value) el.setAttribute(attr, value); };
  function whose(gallery) {
    const col = gallery.closest('.result-col');
    if (col) return text(col.querySelector('.col-head strong'));
    const row = gallery.closest('.prog-row');
    if (row) {
      const head = text(document.querySelector('#prog-head h3')).replace(/ progression.*$/, '');
      return `${head || 'Progression'} ${text(row.querySelector('.step-label strong')).toLowerCase()}`;
    }
    return '';
  }
  function name() {
    for (const gallery of document.querySelectorAll('.result-gallery, .prog-gallery')) {
      const who = whose(gallery);
      for (const item of gallery.querySelectorAll('.thumbnail-item')) {
        const caption = text(item.querySelector('.caption-label'));
        if (!caption) continue;
        const rank = (caption.match(/^#(\\d+)/) || [])[1];
        const target = caption.includes('✓ target') ? ', ground-truth target' : ', not the ground truth';
        const known = caption.includes('✓ target') || document.querySelector('#compare-status')?.textContent.includes('framed in green');
        set(item, 'aria-label', `${who} result${rank ? ' ' + rank : ''}${known ? target : ''}: ${caption}`);
      }
    }
    for (const item of document.querySelectorAll('#ref-examples-gallery .thumbnail-item')) {
      const caption = text(item.querySelector('.caption-label'));
      if (caption) set(item, 'aria-label', `Example query: ${caption}`);
    }
    for (const pre of document.querySelectorAll('.prose pre')) {  // a scroll box is reachable by keyboard
      if (pre.scrollWidth > pre.clientWidth + 1 || pre.scrollHeight > pre.clientHeight + 1) set(pre, 'tabindex', '0');
    }
    for (const [id, label] of Object.entries(IMAGES)) {
      const box = document.getElementById(id);
      if (!box) continue;
      for (const b of box.querySelectorAll('button:has(img)')) set(b, 'aria-label', label);
      for (const img of box.querySelectorAll('img')) set(img, 'alt', label);
    }
  }
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; name(); });
  }).observe(document.documentElement, {subtree: true, childList: true, characterData: true,
                                        attributes: true, attributeFilter: ['aria-label', 'src']});
})();
</script>
"""
