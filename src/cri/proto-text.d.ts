// Bun imports a file `with { type: "text" }` as its contents; used to embed proto/cri.proto.
declare module "*.proto" {
  const text: string;
  export default text;
}
