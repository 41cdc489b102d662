// The model lineage as an SVG tree: versions left to right by generation of training, each leaf on a row of its
// own and each parent centred on its children.
const SVG = 'http://www.w3.org/2000/svg'; // the SVG namespace: a name, never fetched
const CHAR_WIDTH = 8; // of the 13px monospace labels
const ROW = 46;
const RADIUS = 9;

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) {
    element.setAttribute(name, String(value));
  }
  element.append(...children);
  return element;
}

/** {node: {version, depth, y, children}} with rows assigned; roots are versions whose parent is not listed. */
function layout(versions) {
  const byId = new Map(versions.map((v) => [v.id, { version: v, children: [], depth: 0, y: 0 }]));
  const roots = [];
  for (const node of byId.values()) {
    const parent = node.version.parent_id ? byId.get(node.version.parent_id) : undefined;
    (parent ? parent.children : roots).push(node);
  }
  const byAge = (a, b) => a.version.created_at.localeCompare(b.version.created_at);
  let row = 0;
  const place = (node, depth) => {
    node.depth = depth;
    node.children.sort(byAge);
    if (!node.children.length) {
      node.y = row;
      row += 1;
    } else {
      node.children.forEach((child) => place(child, depth + 1));
      node.y = (node.children[0].y + node.children.at(-1).y) / 2;
    }
  };
  roots.sort(byAge).forEach((root) => place(root, 0));
  return { nodes: [...byId.values()], rows: row };
}

export function lineageTree(versions, onSelect) {
  const { nodes, rows } = layout(versions);
  const depth = Math.max(0, ...nodes.map((n) => n.depth));
  const label = Math.max(...nodes.map((n) => n.version.id.length)) * CHAR_WIDTH;
  const column = Math.max(120, label + 50);
  const x = (n) => 20 + n.depth * column;
  const y = (n) => 24 + n.y * ROW;
  const root = svg('svg', {
    width: 40 + depth * column + label + 30,
    height: 24 + Math.max(rows, 1) * ROW,
    role: 'img',
    'aria-label': 'model lineage',
  });
  for (const node of nodes) {
    for (const child of node.children) {
      const midX = (x(node) + x(child)) / 2;
      root.append(svg('path', {
        class: 'edge',
        d: `M${x(node)},${y(node)} C${midX},${y(node)} ${midX},${y(child)} ${x(child)},${y(child)}`,
      }));
    }
  }
  for (const node of nodes) {
    const { version } = node;
    const group = svg('g', { class: `node ${version.status}`, tabindex: 0, 'data-id': version.id },
      svg('title', {}, `${version.id} (${version.status})${version.reason ? `: ${version.reason}` : ''}`),
      svg('circle', { cx: x(node), cy: y(node), r: RADIUS }),
      svg('text', { x: x(node) + RADIUS + 5, y: y(node) + 4 }, version.id));
    group.addEventListener('click', () => onSelect(version.id));
    group.addEventListener('keydown', (event) => event.key === 'Enter' && onSelect(version.id));
    root.append(group);
  }
  return root;
}
