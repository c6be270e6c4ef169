module @tp {
  func.func public @main(%v0: tensor<2x3xbf16>, %v1: tensor<3xbf16>, %v2: tensor<f32>) -> (tensor<2x3xbf16>) {
    %v3 = "stablehlo.convert"(%v0) : (tensor<2x3xbf16>) -> tensor<2x3xf32>
    %v4 = "stablehlo.convert"(%v1) : (tensor<3xbf16>) -> tensor<3xf32>
    %v5 = "stablehlo.broadcast_in_dim"(%v4) {broadcast_dimensions = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
    %v6 = "stablehlo.broadcast_in_dim"(%v2) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
    %v7 = "stablehlo.multiply"(%v5, %v6) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v8 = "stablehlo.add"(%v3, %v7) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v9 = "stablehlo.convert"(%v8) : (tensor<2x3xf32>) -> tensor<2x3xbf16>
    "func.return"(%v9) : (tensor<2x3xbf16>) -> ()
  }
}
