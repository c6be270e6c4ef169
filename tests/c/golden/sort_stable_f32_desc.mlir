module @tp {
  func.func public @main(%v0: tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>) {
    %v1 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<2x5xi64>
    %v2:2 = "stablehlo.sort"(%v0, %v1) ({
      ^bb0(%v3: tensor<f32>, %v4: tensor<f32>, %v5: tensor<i64>, %v6: tensor<i64>):
        %v7 = "stablehlo.compare"(%v3, %v4) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %v8 = "stablehlo.compare"(%v3, %v3) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %v9 = "stablehlo.compare"(%v4, %v4) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %v10 = "stablehlo.not"(%v9) : (tensor<i1>) -> tensor<i1>
        %v11 = "stablehlo.and"(%v8, %v10) : (tensor<i1>, tensor<i1>) -> tensor<i1>
        %v12 = "stablehlo.or"(%v7, %v11) : (tensor<i1>, tensor<i1>) -> tensor<i1>
        "stablehlo.return"(%v12) : (tensor<i1>) -> ()
    }) {dimension = 1 : i64, is_stable = true} : (tensor<2x5xf32>, tensor<2x5xi64>) -> (tensor<2x5xf32>, tensor<2x5xi64>)
    %v13 = "stablehlo.reshape"(%v2#0) : (tensor<2x5xf32>) -> tensor<2x5xf32>
    %v14 = "stablehlo.reshape"(%v2#1) : (tensor<2x5xi64>) -> tensor<2x5xi64>
    "func.return"(%v13, %v14) : (tensor<2x5xf32>, tensor<2x5xi64>) -> ()
  }
}
