// The sign-in page posts a plain form, so the key never passes through page JavaScript; this only explains why the
// visitor is here and where they go back to.
const REASONS = {
  unknown_key: 'That key is unknown or revoked. Use a key from `lamarck keys create`.',
  expired: 'Your sign-in has expired or was signed out. Sign in again.',
};

const params = new URLSearchParams(window.location.search);
const reason = REASONS[params.get('error') ?? ''];
if (reason) {
  const message = document.getElementById('message');
  message.textContent = reason;
  message.hidden = false;
}
const next = params.get('next');
if (next && next.startsWith('/ui/') && !next.startsWith('/ui//')) {
  document.getElementById('next').value = next;
}
document.getElementById('key').focus();
