// Building elements from data without innerHTML, so text from the API (model output, prompts) is never markup.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (name === 'class') {
      element.className = value;
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (name.startsWith('on')) {
      element.addEventListener(name.slice(2), value);
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) {
      continue;
    }
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

export function byId(id) {
  const element = document.getElementById(id);
  if (!element) {
    throw new Error(`the page has no #${id}`);
  }
  return element;
}

export function percent(rate) {
  return rate === null || rate === undefined ? '–' : `${Math.round(rate * 100)}%`;
}

export function clock(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleTimeString();
}
