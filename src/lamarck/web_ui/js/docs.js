// Swagger UI over this server's OpenAPI document, from the vendored bundle. The validator badge is off: it would
// send the document to validator.swagger.io.
window.SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  layout: 'BaseLayout',
  deepLinking: true,
  validatorUrl: null,
  presets: [window.SwaggerUIBundle.presets.apis],
});
