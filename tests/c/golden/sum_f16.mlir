module @tp {
  func.func public @main(%v0: tensor<2x3xf16>) -> (tensor<f16>) {
    %v1 = "stablehlo.convert"(%v0) : (tensor<2x3xf16>) -> tensor<2x3xf32>
    %v2 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v3 = "stablehlo.reduce"(%v1, %v2) ({
      ^bb0(%v4: tensor<f32>, %v5: tensor<f32>):
        %v6 = "stablehlo.add"(%v4, %v5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%v6) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0, 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
    %v7 = "stablehlo.convert"(%v3) : (tensor<f32>) -> tensor<f16>
    "func.return"(%v7) : (tensor<f16>) -> ()
  }
}
